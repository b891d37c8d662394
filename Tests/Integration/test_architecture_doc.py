"""docs/architecture.md stays true: its table of targets has one row per target of Sources/, and the
"imports" column of each row is exactly the set of Sources/ targets that the target's files import. The test
reads the `import` lines of every Swift file under Sources/ (C shims have none), so a new arrow, or one no file
draws any more, fails it with the edit to make to the page."""

import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"
SOURCES = ROOT / "Sources"

# `import X`, `@testable import X`, `package import X`, `@preconcurrency import X`, `import struct X.Y`, ...
IMPORT = re.compile(r"^\s*(?:@\w+\s+)*(?:(?:public|package|internal|fileprivate|private)\s+)?import\s+"
                    r"(?:(?:struct|class|enum|protocol|typealias|func|var|let)\s+)?(\w+)")
# A row of the targets table: | `Target` | what it holds | `A`, `B` |
ROW = re.compile(r"^\|\s*`([\w-]+)`\s*\|(.*)\|(.*)\|\s*$")


def targets():
    return sorted(path.name for path in SOURCES.iterdir() if path.is_dir())


def imports_in_sources():
    """Per target of Sources/: {imported target: the first file and line that imports it}."""
    names = set(targets())
    graph = {}
    for target in names:
        arrows = {}
        for path in sorted((SOURCES / target).rglob("*.swift")):
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                match = IMPORT.match(line)
                if match and match.group(1) in names and match.group(1) != target:
                    arrows.setdefault(match.group(1), f"{path.relative_to(ROOT)}:{number}")
        graph[target] = arrows
    return graph


def imports_on_page(text):
    """Per target row of the page's table: the set of targets in its imports column."""
    rows = {}
    for line in text.splitlines():
        match = ROW.match(line)
        if match:
            rows[match.group(1)] = set(re.findall(r"`([\w-]+)`", match.group(3)))
    return rows


def differences(graph, page):
    """The edits that make the page's table say what Sources/ imports, one sentence each."""
    edits = []
    for target in sorted(set(graph) - set(page)):
        listed = ", ".join(f"`{name}`" for name in sorted(graph[target])) or "—"
        edits.append(f"add a row for `{target}` (imports: {listed})")
    for target in sorted(set(page) - set(graph)):
        edits.append(f"remove the row of `{target}`: Sources/{target} does not exist")
    for target in sorted(set(graph) & set(page)):
        for name in sorted(set(graph[target]) - page[target]):
            edits.append(f"add `{name}` to the imports of `{target}` ({graph[target][name]} imports it)")
        for name in sorted(page[target] - set(graph[target])):
            edits.append(f"remove `{name}` from the imports of `{target}`: no file of Sources/{target} imports it")
    return edits


def test_the_page_names_every_arrow_of_the_import_graph_and_no_other():
    graph = imports_in_sources()
    page = imports_on_page(PAGE.read_text())
    edits = differences(graph, page)
    assert not edits, "docs/architecture.md, table of targets: " + "; ".join(edits)


def test_the_check_names_the_arrow_to_add_and_the_one_to_remove():
    graph = {"A": {"B": "Sources/A/a.swift:1"}, "B": {}, "C": {}}
    page = imports_on_page("| `A` | a | `C` |\n| `B` | b | — |\n| `D` | d | — |\n")
    assert differences(graph, page) == [
        "add a row for `C` (imports: —)",
        "remove the row of `D`: Sources/D does not exist",
        "add `B` to the imports of `A` (Sources/A/a.swift:1 imports it)",
        "remove `C` from the imports of `A`: no file of Sources/A imports it",
    ]
    assert IMPORT.match("@testable import KeychainStore").group(1) == "KeychainStore"
    assert IMPORT.match("package import struct DBus.DBusMessage").group(1) == "DBus"
    assert IMPORT.match("// import Posix") is None
