// A visible cue on everything that scrolls sideways in the article (wide tables, long display math): the box
// gets the class calib-scrolls (an inner shadow on its right edge, claims.css) and a "scroll →" hint above it.
// Recomputed when the window is resized and after MathJax has typeset (display math only then has its width).
(function () {
  function scrollsSideways(el) {
    var style = window.getComputedStyle(el);
    return (style.overflowX === "auto" || style.overflowX === "scroll") && el.scrollWidth > el.clientWidth + 1;
  }
  function hintFor(el) {
    var prev = el.previousElementSibling;
    return prev && prev.classList.contains("calib-scroll-hint") ? prev : null;
  }
  // every element of the article but the glyphs of a typeset formula (most of a chapter's elements, none of which
  // scrolls): the formula's own boxes, mjx-container and mjx-math, are looked at
  var CANDIDATES = "*:not(mjx-math *):not(mjx-assistive-mml *):not(.calib-scroll-hint)";
  function mark() {
    var article = document.querySelector("article") || document.body;
    var elements = article.querySelectorAll(CANDIDATES);
    // measure every element first, then change the page: a change between two measurements would make the
    // browser lay the page out again for the next one
    var wide = Array.prototype.map.call(elements, scrollsSideways);
    Array.prototype.forEach.call(elements, function (el, i) {
      if (el.classList.contains("calib-scrolls") !== wide[i]) { el.classList.toggle("calib-scrolls", wide[i]); }
      var hint = hintFor(el);
      if (wide[i] && !hint && el.parentNode) {
        hint = document.createElement("span");
        hint.className = "calib-scroll-hint";
        hint.setAttribute("aria-hidden", "true");
        hint.textContent = "scroll \u2192";
        el.parentNode.insertBefore(hint, el);
      } else if (!wide[i] && hint) {
        hint.remove();
      }
    });
  }
  function ready(fn) {
    if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
  }
  ready(function () {
    mark();
    window.addEventListener("load", function () {
      mark();
      if (window.MathJax && window.MathJax.startup && window.MathJax.startup.promise) {
        window.MathJax.startup.promise.then(mark);
      }
    });
    var timer = null;
    window.addEventListener("resize", function () { clearTimeout(timer); timer = setTimeout(mark, 150); });
  });
})();
