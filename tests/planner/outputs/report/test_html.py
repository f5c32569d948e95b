"""The HTML report is one self-contained, well-formed file with inline SVG charts."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from xml.etree import ElementTree

import pytest

import planner
from planner.outputs.report import render_report

VOID = {"meta", "br", "hr", "img", "input", "link"}


class Balance(HTMLParser):
    """Checks that every non-void element closes in order and collects external references."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.refs: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.refs += [v for k, v in attrs if k in ("src", "href") and v and not v.startswith("#")]
        if tag not in VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag, attrs):
        self.tags.append(tag)

    def handle_endtag(self, tag):
        assert self.stack and self.stack[-1] == tag, f"</{tag}> closes <{self.stack[-1] if self.stack else None}>"
        self.stack.pop()


@pytest.fixture(scope="module")
def page(llama_plan) -> str:
    return planner.report(llama_plan, "html")


def test_well_formed(page: str) -> None:
    parser = Balance()
    parser.feed(page)
    assert parser.stack == []


def test_self_contained(page: str) -> None:
    parser = Balance()
    parser.feed(page)
    assert parser.refs == []
    assert not {"script", "link", "img", "iframe", "object"} & set(parser.tags)
    assert "@import" not in page and "url(" not in page
    assert set(re.findall(r"https?://[^\s\"'<>]+", page)) <= {"http://www.w3.org/2000/svg"}  # the SVG namespace, never fetched


def test_charts_are_inline_svg(page: str) -> None:
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert len(svgs) == 5  # alternatives, rank grid, time, memory, timeline
    for svg in svgs:
        ElementTree.fromstring(svg)


def test_sections_and_runner_up(page: str, llama_plan) -> None:
    for key in ("summary", "why", "layout", "stages", "time", "memory", "schedule", "sensitivity", "search", "assumptions", "glossary", "launch"):
        assert f'<section id="{key}">' in page
    assert "runner-up" in page and llama_plan.alternatives[0].summary in page


def test_text_is_escaped(llama_plan) -> None:
    odd = llama_plan.model_copy(update={"model": llama_plan.model.model_copy(update={"name": "x<y>&z"})})
    page = render_report(odd, "html", reestimate=False)
    assert "x&lt;y&gt;&amp;z" in page and "x<y>" not in page


def test_plan_without_alternatives(small_plan) -> None:
    page = planner.report(small_plan, "html")
    assert "No alternative was kept" in page and "<svg" in page
