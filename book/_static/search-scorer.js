// The book's search ranks its chapters and pages above the API reference. Sphinx's default scores a match in an
// object's name (every attribute and parameter of the reference: "temperature" finds TemperatureScaling.temperature_
// first) above a match in a chapter's title or text; html_search_scorer (_config.yml) puts this file in
// language_data.js, where searchtools.js takes Scorer from it. Sphinx's default weights, and a score function that
// moves a result of the reference (book/api/, the module source pages) below the pages of the book.
var Scorer = {
  score: function (result) {
    var docname = result[0], score = result[4];
    return /^(book\/api\/|_modules\/)/.test(docname) ? score - 20 : score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};
