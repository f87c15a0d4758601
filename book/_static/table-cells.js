// Table cells on a phone keep their lines. A table shrunk to a phone's column broke each cell wherever it could
// ("1.48 / ± / 0.14", a confidence interval over four lines); each cell of the article's tables gets a minimum width
// in characters (the CSS variable --calib-cell-min, which claims.css applies below 768 px): a short cell (a number,
// an interval, a name) its whole length, a longer one the length of the longer of the two lines it splits into at
// the space nearest its middle, up to 30 characters a line. A table then wider than its column scrolls in its box,
// with scroll-cue.js's cue. The ledger's summary (rotated headers) and the general index (stacked on a phone,
// api.css) keep their own layouts.
(function () {
  var SHORT = 16, LINE = 30;
  function minimum(text) {
    text = text.replace(/\s+/g, " ").trim();
    var n = text.length, best = n;
    if (n <= SHORT) { return n; }
    for (var i = text.indexOf(" "); i > 0; i = text.indexOf(" ", i + 1)) {
      best = Math.min(best, Math.max(i, n - i - 1));
    }
    return Math.min(LINE, best + 1);
  }
  function mark() {
    document.querySelectorAll("article table:not(.indextable) > * > tr > td, article table:not(.indextable) > * > tr > th")
      .forEach(function (cell) {
        if (cell.closest("section#summary")) { return; }
        var ch = minimum(cell.textContent || "");
        if (ch) { cell.style.setProperty("--calib-cell-min", ch + "ch"); }
      });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", mark); } else { mark(); }
})();
