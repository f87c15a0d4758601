// Offline filter of the claims ledger by paper and verdict (no network, no library).
// The ledger page marks each claim as <div class="claim-entry paper-P verdict-V ...">; the summary table's counts
// link to ?paper=P&verdict=V, which this script reads on load.
(function () {
  function ready(fn) {
    if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
  }
  ready(function () {
    var paper = document.getElementById("claim-filter-paper");
    var verdict = document.getElementById("claim-filter-verdict");
    var count = document.getElementById("claim-filter-count");
    if (!paper || !verdict) { return; }
    var entries = Array.prototype.slice.call(document.querySelectorAll(".claim-entry"));
    var params = new URLSearchParams(window.location.search);
    if (params.get("paper")) { paper.value = params.get("paper"); }
    if (params.get("verdict")) { verdict.value = params.get("verdict"); }
    function apply() {
      var shown = 0;
      entries.forEach(function (e) {
        var ok = (!paper.value || e.classList.contains("paper-" + paper.value)) &&
                 (!verdict.value || e.classList.contains("verdict-" + verdict.value));
        e.hidden = !ok;
        if (ok) { shown += 1; }
      });
      // hide a paper's section when none of its claims is shown
      document.querySelectorAll("section").forEach(function (s) {
        var mine = s.querySelectorAll(":scope > .claim-entry");
        if (mine.length) {
          s.hidden = !Array.prototype.some.call(mine, function (e) { return !e.hidden; });
        }
      });
      if (count) { count.textContent = shown + " of " + entries.length + " claims shown"; }
    }
    paper.addEventListener("change", apply);
    verdict.addEventListener("change", apply);
    apply();
  });
})();
