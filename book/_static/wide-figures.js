// Multi-panel figures on a phone. A figure much wider than tall (panels side by side) shrunk to a phone's column
// shows its tick labels at 3-5 px; marked .calib-wide-figure here, it keeps at least 560 px on a narrow screen
// and scrolls sideways in its own box (claims.css), with scroll-cue.js's shadow and "scroll →" hint. Runs before
// scroll-cue.js's own pass (listed first in _config.yml), and again as each image loads.
(function () {
  var WIDE = 1.6;                                   // width / height above which a figure holds side-by-side panels
  function mark(img) {
    if (!img.naturalWidth || !img.naturalHeight) { return; }
    var box = img.closest("figure") || img.closest("div.cell_output");
    if (box) { box.classList.toggle("calib-wide-figure", img.naturalWidth / img.naturalHeight > WIDE); }
  }
  function markAll() {
    document.querySelectorAll("article div.cell_output img, article figure img").forEach(function (img) {
      if (img.complete) { mark(img); } else { img.addEventListener("load", function () { mark(img); }); }
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", markAll); } else { markAll(); }
  window.addEventListener("load", markAll);
})();
