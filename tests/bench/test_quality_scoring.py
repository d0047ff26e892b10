"""How bench/quality.py scores a reading: Markdown's syntax is not text, capitals-only truth,
ligatures and line-end hyphens alike on both sides."""

from __future__ import annotations

import argparse

from bench.quality import Case, job_params, score, strip_markdown
from bench.quality_checks import kind_of
from bench.sroie_truth import truth_text


def test_list_markers_and_maths_fences_are_not_counted_as_text() -> None:
    markdown = "# Title\n- first item\n* second item\n$$ x = 1 $$\n-5.59 stays"
    assert (
        strip_markdown(markdown).split() == "Title first item second item x = 1 -5.59 stays".split()
    )


def test_a_truth_in_capitals_only_is_compared_case_folded() -> None:
    assert score("Total Amount 31.00", "TOTAL AMOUNT 31.00", 0.0, "").cer_distance == 0
    assert score("Total Amount", "Total amount", 0.0, "").cer_distance == 1


def test_ligatures_and_words_broken_at_a_line_end_score_alike_either_way() -> None:
    truth = "an efﬁcient com-\npiler for Trace-\nMonkey"  # a PDF's text layer, as printed
    joined = "an efficient compiler for Trace-\nMonkey"  # an engine that joins the word
    kept = "an efficient com-\npiler for Trace-\nMonkey"  # one that keeps the print
    assert score(joined, truth, 0.0, "").cer_distance == 0
    assert score(kept, truth, 0.0, "").cer_distance == 0
    # Only a letter's hyphen before a lower-case letter is a broken word: "1- 2" stays.
    assert score("pages 1- 2", "pages 12", 0.0, "").cer_distance == 2


def test_sroie_boxes_are_put_in_rows_top_to_bottom_left_to_right() -> None:
    annotation = "\n".join(
        [
            "300,100,380,100,380,120,300,120,31.00",  # listed first, right of its label
            "10,10,200,10,200,30,10,30,SHOP NAME",
            "10,102,120,102,120,118,10,118,TOTAL:",
        ]
    )
    assert truth_text(annotation) == "SHOP NAME\nTOTAL: 31.00\n"


def test_cases_are_grouped_by_kind_from_their_names() -> None:
    kinds = {
        name: kind_of(name)
        for name in (
            "sroie-004",
            "sroie-001-skew4",
            "eurotext-skew-5",
            "phototest-rotated-L",
            "file_pdfjs_test-rot90",
            "phototest",
            "tracemonkey",
        )
    }
    assert kinds == {
        "sroie-004": "receipt",
        "sroie-001-skew4": "skewed",
        "eurotext-skew-5": "skewed",
        "phototest-rotated-L": "turned 90/180/270",
        "file_pdfjs_test-rot90": "turned 90/180/270",
        "phototest": "scan",
        "tracemonkey": "born-digital render",
    }


def test_no_layout_submits_the_jobs_with_layout_false_and_the_default_without() -> None:
    case = Case("page", b"%PDF", [], 1, "")
    off = job_params(case, argparse.Namespace(dpi=150, no_layout=True))
    default = job_params(case, argparse.Namespace(dpi=150, no_layout=False))
    assert off == {**default, "layout": "false"}
    assert default == {"text_layer": "off", "dpi": "150", "filename": "page"}
