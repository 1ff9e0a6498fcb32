/* Search ranking of the book (html_search_scorer, set by book/_ext/book_site.py; Sphinx puts
 * this file into language_data.js).  Sphinx's default weights, and one rule: for the book's
 * own terms the chapters come first.  A chapter's result gains CHAPTER points, the API page
 * ("About attnlib", whose docstrings repeat every term) loses API points, so "Att-SVM" finds
 * chapter 2 before attnlib.svm; a query that names an API object exactly (objNameMatch +
 * objPrio, 26 points) still finds it near the top.
 */
var Scorer = Object.assign(typeof Scorer === "undefined" ? {
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
} : Scorer, {
  CHAPTER: 20,
  API: 10,
  score: (result) => {
    const [docname, , , , score] = result;
    if (/^book\/(0[1-9]|10)_/.test(docname)) return score + Scorer.CHAPTER;
    if (/^book\/api$/.test(docname)) return score - Scorer.API;
    return score;
  },
});
