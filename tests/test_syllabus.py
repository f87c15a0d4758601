"""Issue 27, item 4: the syllabus's problem sets list every exercise once, and their autograded points are the
answer key's (``Expected.points`` summed over the parts)."""

import re
from pathlib import Path

from calib_book import exercises

ROOT = Path(__file__).resolve().parents[1]
SYLLABUS = (ROOT / "book" / "syllabus.md").read_text(encoding="utf-8")
ROW = re.compile(r"^\| `(?P<label>[\w-]+)` \| (?P<chapter>\d\d) \| (?P<points>\d+) \|$", re.M)


def test_every_exercise_is_set_once_with_the_keys_points():
    rows = {m["label"]: m for m in ROW.finditer(SYLLABUS)}
    assert len(rows) == len(ROW.findall(SYLLABUS)), "an exercise is set twice"
    in_chapters = {entry.label for path in sorted((ROOT / "chapters").glob("*.md"))
                   for entry in exercises.exercises_in(path.stem, path.read_text(encoding="utf-8"))}
    assert set(rows) == in_chapters
    for label, row in rows.items():
        assert label in exercises.EXERCISES, f"{label} has no check: every exercise is autograded"
        assert int(row["points"]) == sum(p.points for p in exercises.EXERCISES[label].parts.values()), label


def test_each_sets_total_is_the_sum_of_its_rows():
    for block in SYLLABUS.split("### Problem set ")[1:]:
        block = block.split("\n### ")[0].split("\n## ")[0]
        total = sum(int(m["points"]) for m in ROW.finditer(block))
        assert f"Autograded points: {total}." in block


IMBALANCE = re.compile(r"long[-_ ]tail|imbalanc|class[-_ ]balanc|\.long_tailed\(", re.I)


def test_no_chapter_answers_the_capstone():
    """Issue 42, section 4: the capstone asks what focal loss and its maps do to calibration under class imbalance.
    No chapter may build an imbalanced split or state a claim about imbalance (a claim's statement, evidence and
    remark are written in the chapter's source, and so is every cell whose output the book shows), and no stored
    result a chapter reads may come from an imbalanced run (its recorded configuration)."""
    import json

    hits = [f"{path.name}:{n}: {line.strip()[:80]}" for path in sorted((ROOT / "chapters").glob("*.md"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if IMBALANCE.search(line)]
    assert not hits, "a chapter answers (part of) the capstone; move the capstone or the chapter: " + "; ".join(hits)
    metas = list((ROOT / "book" / "results").rglob("meta.json"))
    assert len(metas) > 100
    for meta in metas:
        assert not IMBALANCE.search(json.dumps(json.loads(meta.read_text()).get("config", {}))), meta
    capstone = SYLLABUS.split("(capstone)=")[1]
    assert "long_tailed(ratio)" in capstone and "rubric" in capstone.lower()
