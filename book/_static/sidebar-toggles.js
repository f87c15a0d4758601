// The contents buttons (the ☰ of the site's contents and the in-page contents button) work on every screen.
// pydata-sphinx-theme 0.17 puts a toggle of each sidebar in its top bar and sphinx-book-theme 1.3 another in the
// article's header, with the same class (primary-toggle, secondary-toggle); both themes' scripts bind the first one
// in the page (document.querySelector), the top bar's, which sphinx-book-theme hides. The one a reader sees, in the
// article's header, had no handler and did nothing (pydata/pydata-sphinx-theme#2451; no release fixes it for
// jupyter-book 1.x's Sphinx 7). A click on any other toggle of a sidebar is passed to the bound one: on a phone it
// opens the sidebar's drawer (pydata's <dialog>), on a desktop it folds the sidebar away (sphinx-book-theme).
// calib_book.browser clicks each visible toggle at 412 px and checks that its drawer opens.
(function () {
  var SELECTORS = [".primary-toggle", ".secondary-toggle"];
  // on the window, in the capture phase: before any handler of the button clicked, which a theme that binds every
  // toggle would have, so that such a theme does not act twice
  window.addEventListener("click", function (event) {
    if (!event.target || !event.target.closest) { return; }
    SELECTORS.forEach(function (selector) {
      var toggle = event.target.closest(selector), bound = document.querySelector(selector);
      if (!toggle || !bound || toggle === bound) { return; }
      event.preventDefault();
      event.stopImmediatePropagation();
      bound.click();
    });
  }, true);
})();
