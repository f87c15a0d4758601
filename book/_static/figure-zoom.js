// Every figure opens full-size on a tap. A figure fits its column, where on a phone its tick labels come out at 4-8 px;
// each figure's image is wrapped in a link to its own file (which a browser without scripts opens) and a tap shows it
// at its natural size (a 10-inch figure 960 px wide, 11 pt labels at 14.7 px) in a dialog that pans in both
// directions; Escape, the close button or a tap outside the image closes it. calib_book.browser measures each
// figure's text on screen at 412 and 1280 px, and checks that a tap opens it full-size.
(function () {
  var FIGURES = "article figure img, article div.cell_output img";
  var dialog = null;
  function build() {
    dialog = document.createElement("dialog");
    dialog.className = "calib-zoom-dialog";
    dialog.setAttribute("aria-label", "Figure at full size");
    var close = document.createElement("button");
    close.type = "button";
    close.className = "calib-zoom-close";
    close.setAttribute("aria-label", "Close the figure");
    close.textContent = "\u00d7";
    close.addEventListener("click", function () { dialog.close(); });
    var image = document.createElement("img");
    image.className = "calib-zoom-image";
    dialog.appendChild(close);
    dialog.appendChild(image);
    dialog.addEventListener("click", function (event) {
      if (event.target === dialog) { dialog.close(); }       // a tap on the backdrop, outside the figure
    });
    document.body.appendChild(dialog);
  }
  function open(img) {
    if (!dialog) { build(); }
    var image = dialog.querySelector("img");
    image.src = img.currentSrc || img.src;
    image.alt = img.alt;
    // its natural size in CSS px: an SVG's width and height, a PNG's pixels
    image.style.width = img.naturalWidth ? img.naturalWidth + "px" : "auto";
    dialog.showModal();
    dialog.scrollTop = 0;
    dialog.scrollLeft = 0;
  }
  function wrap(img) {
    if (img.closest("a") || img.closest(".calib-zoom-dialog")) { return; }
    var link = document.createElement("a");
    link.className = "calib-zoom";
    link.href = img.getAttribute("src");
    link.title = "Open the figure full-size";
    link.setAttribute("aria-label", "Open the figure full-size: " + (img.alt || ""));
    img.parentNode.insertBefore(link, img);
    link.appendChild(img);
  }
  function ready(fn) {
    if (document.readyState !== "loading") { fn(); } else { document.addEventListener("DOMContentLoaded", fn); }
  }
  ready(function () {
    document.querySelectorAll(FIGURES).forEach(wrap);
    document.addEventListener("click", function (event) {
      var link = event.target.closest && event.target.closest("a.calib-zoom");
      if (!link || event.defaultPrevented || event.button || event.metaKey || event.ctrlKey || event.shiftKey) { return; }
      var img = link.querySelector("img");
      if (!img) { return; }
      event.preventDefault();
      open(img);
    });
  });
})();
