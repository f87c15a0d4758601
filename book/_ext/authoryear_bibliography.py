"""A pybtex style for the book's reference list: labels "Mukhoti et al., 2020", sorted by author and year.

The chapters cite author-year ({cite:t}, {cite:p} with ``bibtex_reference_style: author_year``); with pybtex's
``plain`` style the list itself would be numbered [1], [2], ... This style keeps ``plain``'s formatting (with
its URL and DOI lines) and changes only the labels and the order. Registered as ``authoryear`` for
``bibtex_default_style`` in _config.yml (sphinxcontrib-bibtex, "Custom formatting, sorting, and labelling").
"""

from collections import Counter

from pybtex.plugin import find_plugin, register_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.sorting.author_year_title import SortingStyle as AuthorYearTitle


def _last_name(person) -> str:
    return Text.from_latex(" ".join(person.prelast_names + person.last_names)).render_as("text")


def author_year_label(entry) -> str:
    """'Brier, 1950', 'Guo and Pleiss, 2017'-style for two authors, 'Mukhoti et al., 2020' for more."""
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    names = [_last_name(p) for p in persons]
    if not names:
        who = entry.fields.get("key") or entry.key
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {entry.fields.get('year', 'n.d.')}"


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        labels = [author_year_label(e) for e in entries]
        counts, seen = Counter(labels), Counter()
        for label in labels:  # two works with one label: 2019a, 2019b
            if counts[label] > 1:
                yield label + "abcdefghijklmnopqrstuvwxyz"[seen[label]]
                seen[label] += 1
            else:
                yield label


class AuthorYearStyle(PlainStyle):
    default_label_style = "authoryear"
    default_sorting_style = "author_year_title"


#: The plain-text backends that are looked up once for every name of the reference list (``_last_name``) and every
#: entry sphinxcontrib-bibtex formats: registered at run time as the very classes their entry points name, since
#: pybtex reads every installed package's entry points at each lookup of an installed one (8 ms: 2.6 s of a build).
TEXT_BACKENDS = ("text", "plaintext")


def setup(app):
    register_plugin("pybtex.style.labels", "authoryear", AuthorYearLabels)
    register_plugin("pybtex.style.formatting", "authoryear", AuthorYearStyle)
    for name in TEXT_BACKENDS:
        register_plugin("pybtex.backends", name, find_plugin("pybtex.backends", name), force=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}


__all__ = ["AuthorYearLabels", "AuthorYearStyle", "AuthorYearTitle", "author_year_label", "setup"]
