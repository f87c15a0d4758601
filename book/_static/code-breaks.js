// Inline code breaks between its parts, never inside a word. A long name or path in the text
// (calib.posthoc.FocalTemperatureScaling, book/results/10-benchmark/regime/grid-cpu.toml) may break after a dot, a
// slash or an underscore, where a <wbr> is put here; claims.css breaks a part inside only when the part alone is wider
// than a line. Copying the code copies no extra character. calib_book.browser reports inline code broken between
// two letters or digits.
(function () {
  var AFTER = /[./_]/;
  function split(node) {
    var text = node.data, parts = [], start = 0;
    for (var i = 1; i < text.length - 1; i++) {
      if (AFTER.test(text[i]) && /\w/.test(text[i + 1])) { parts.push(text.slice(start, i + 1)); start = i + 1; }
    }
    if (!parts.length) { return; }
    parts.push(text.slice(start));
    var fragment = document.createDocumentFragment();
    parts.forEach(function (part, k) {
      if (k) { fragment.appendChild(document.createElement("wbr")); }
      fragment.appendChild(document.createTextNode(part));
    });
    node.parentNode.replaceChild(fragment, node);
  }
  function mark() {
    document.querySelectorAll("article code:not(pre code)").forEach(function (code) {
      var walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT), nodes = [];
      while (walker.nextNode()) { nodes.push(walker.currentNode); }
      nodes.forEach(split);
    });
  }
  if (document.readyState === "loading") { document.addEventListener("DOMContentLoaded", mark); } else { mark(); }
})();
