"""The package's metadata is declared in setup.cfg; this file computes the one field that cannot
be declared there: the page a package index shows, which is README.md with its links made
absolute.

README.md links to docs/ and to its own sections by relative links, which work in a checkout
and on the repository's web pages but lead nowhere on a package index page. Here they point at
the repository (setup.cfg's ``Source`` project URL) instead, so the same text serves both.
"""

import configparser
import re
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent

#: A Markdown link target that is neither absolute (``scheme:``) nor empty.
_RELATIVE_LINK = re.compile(r"\]\((?![a-zA-Z][a-zA-Z0-9+.-]*:)([^)\s]+)\)")


def repository_url() -> str:
    """setup.cfg's ``Source`` project URL: where README.md's relative links lead."""
    config = configparser.ConfigParser()
    config.read(str(HERE / "setup.cfg"), encoding="utf-8")
    for line in config["metadata"]["project_urls"].strip().splitlines():
        name, _, url = line.partition("=")
        if name.strip() == "Source":
            return url.strip().rstrip("/")
    raise SystemExit("setup.cfg: project_urls has no Source")


def index_page(readme: str, repository: str) -> str:
    """``readme`` with every relative link made absolute: files and directories lead to the
    main branch's copy, ``#section`` links to the repository page that shows the README."""

    def absolute(match: "re.Match[str]") -> str:
        target = match.group(1)
        if target.startswith("#"):
            return f"]({repository}{target})"
        path = target[2:] if target.startswith("./") else target
        return f"]({repository}/blob/main/{path})"

    return _RELATIVE_LINK.sub(absolute, readme)


setup(
    long_description=index_page((HERE / "README.md").read_text(encoding="utf-8"), repository_url()),
    long_description_content_type="text/markdown",
)
