"""The distribution as users meet it: the sdist and the wheel built from this tree, and what a
package index and pip read from them.

The build runs offline and in a few seconds: the package's files are copied to a temporary
directory, the sdist is built there with the running interpreter's setuptools (no isolated
environment, nothing downloaded), and the wheel is built from the unpacked sdist, as pip and
``python -m build`` do, so a file the sdist forgets is missing from the wheel too.
"""

from __future__ import annotations

import ast
import configparser
import email
import email.message
import importlib.util
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from typing import Dict, List, NamedTuple, Set

import pytest

ROOT = Path(__file__).resolve().parents[2]

#: What the build needs from the tree (the packages, the metadata and the files they name).
BUILD_INPUTS = (
    "setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE",
    "CHANGELOG.md", "minigrpc", "cni_client",
)

pytestmark = pytest.mark.timeout(300)


class Built(NamedTuple):
    sdist_names: List[str]
    wheel_names: List[str]
    #: The wheel's METADATA (what pip and the index read).
    metadata: email.message.Message


def _can_build_wheels() -> bool:
    if importlib.util.find_spec("setuptools") is None:
        return False
    # setuptools builds wheels itself from 70.1 on; before, the wheel package does.
    return (
        importlib.util.find_spec("setuptools.command.bdist_wheel") is not None
        or importlib.util.find_spec("wheel") is not None
    )


def _backend(call: str, source: Path, out: Path) -> str:
    """Run ``setuptools.build_meta.<call>(out)`` in ``source``, in a child interpreter."""
    code = (
        "import sys, setuptools.build_meta as backend\n"
        f"print(backend.{call}(sys.argv[1]))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(out)], cwd=source, capture_output=True, text=True,
        timeout=120, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    if not _can_build_wheels():
        pytest.skip("this interpreter has no setuptools that builds wheels (a venv without it)")
    tree = tmp_path_factory.mktemp("tree")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in BUILD_INPUTS:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, tree / name, ignore=ignore)
        else:
            shutil.copy2(path, tree / name)
    out = tmp_path_factory.mktemp("dist")
    sdist = out / _backend("build_sdist", tree, out)
    unpacked = tmp_path_factory.mktemp("sdist")
    with tarfile.open(sdist) as archive:
        sdist_names = archive.getnames()
        # Python 3.12+ asks for a filter; "data" is the safe one (and the default from 3.14).
        safe = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
        archive.extractall(unpacked, **safe)  # type: ignore[arg-type]
    (top,) = unpacked.iterdir()
    wheel = out / _backend("build_wheel", top, out)
    with zipfile.ZipFile(wheel) as archive:
        wheel_names = archive.namelist()
        (metadata_name,) = [n for n in wheel_names if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(metadata_name))
    root = top.name + "/"
    return Built([n[len(root):] for n in sdist_names if n.startswith(root)], wheel_names, metadata)


def _source_version(path: Path) -> str:
    """``__version__`` as a module assigns it, read without importing the module."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets
        ):
            return str(ast.literal_eval(node.value))
    raise AssertionError(f"no __version__ in {path}")


def _tox_pythons() -> Set[str]:
    """The CPython versions tox runs the whole suite on: ``py37`` ... as ``3.7`` ..."""
    config = configparser.ConfigParser()
    config.read(ROOT / "tox.ini", encoding="utf-8")
    envs = [env.strip() for env in config["tox"]["envlist"].split(",")]
    return {f"{m.group(1)}.{m.group(2)}" for m in map(re.compile(r"py(3)(\d+)$").match, envs) if m}


# -- one version -------------------------------------------------------------------------------


def test_the_version_is_written_once() -> None:
    """setup.cfg reads minigrpc's ``__version__`` (minigrpc/_version.py, which the package
    re-exports); the plugin's package states the same one (its ``__init__`` may import nothing:
    the plugin's VERSION probe must stay cheap)."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    assert config["metadata"]["version"] == "attr: minigrpc._version.__version__"
    version = _source_version(ROOT / "minigrpc" / "_version.py")
    assert re.fullmatch(r"\d+\.\d+\.\d+", version)
    assert _source_version(ROOT / "cni_client" / "__init__.py") == version
    assert f"## {version} " in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def test_the_built_version_is_the_packages(built: Built) -> None:
    assert built.metadata["Version"] == _source_version(ROOT / "minigrpc" / "_version.py")


# -- files ---------------------------------------------------------------------------------------


def test_the_sdist_carries_the_licence_changelog_and_typing_markers(built: Built) -> None:
    for name in ("LICENSE", "CHANGELOG.md", "README.md", "setup.py", "setup.cfg",
                 "pyproject.toml", "minigrpc/py.typed", "cni_client/py.typed"):
        assert name in built.sdist_names, name


def test_the_wheel_carries_the_licence_and_typing_markers(built: Built) -> None:
    names = built.wheel_names
    assert "minigrpc/py.typed" in names and "cni_client/py.typed" in names
    licences = [n for n in names if re.search(r"\.dist-info/(licenses/)?LICENSE$", n)]
    assert licences, names
    assert built.metadata.get_all("License-File") == ["LICENSE"]
    # The add-ons' generated modules ship; the test suite does not.
    assert "minigrpc/health/v1/health_pb2.py" in names
    assert not [n for n in names if n.startswith("tests/")]


def test_the_licence_file_is_the_declared_licence() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    assert config["metadata"]["license"] == "Apache-2.0"


# -- metadata ------------------------------------------------------------------------------------


def test_the_runtime_dependency_is_protobuf_only(built: Built) -> None:
    """minigrpc's own codecs speak HTTP/2 and HPACK; h2 is a test and benchmark peer."""
    requires = built.metadata.get_all("Requires-Dist") or []
    required = [r for r in requires if "extra ==" not in r]
    names = {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in required}  # type: ignore[union-attr]
    assert names == {"protobuf"}, required
    for extra in ("test", "bench"):
        # Quoted either way: older setuptools write ``extra == 'test'`` (Python 3.7's).
        marker = re.compile(rf"""extra\s*==\s*["']{extra}["']""")
        assert any(re.match(r"h2\b", r) and marker.search(r) for r in requires), requires


def test_python_versions_are_those_the_suite_runs_on(built: Built) -> None:
    pythons = _tox_pythons()
    classifiers = built.metadata.get_all("Classifier") or []
    stated = {c.rsplit(" :: ", 1)[1] for c in classifiers
              if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert stated == pythons
    oldest = min(pythons, key=lambda v: tuple(map(int, v.split("."))))
    assert built.metadata["Requires-Python"] == f">={oldest}"
    for classifier in ("Programming Language :: Python :: 3 :: Only",
                       "Programming Language :: Python :: Implementation :: CPython",
                       "Programming Language :: Python :: Implementation :: PyPy",
                       "Typing :: Typed"):
        assert classifier in classifiers


def test_licence_and_project_urls(built: Built) -> None:
    metadata = built.metadata
    assert (metadata["License-Expression"] or metadata["License"]) == "Apache-2.0"
    urls: Dict[str, str] = dict(
        (part.strip() for part in entry.split(",", 1))  # type: ignore[misc]
        for entry in metadata.get_all("Project-URL") or []
    )
    assert set(urls) >= {"Source", "Documentation", "Changelog", "Issues"}
    assert all(url.startswith("https://") for url in urls.values()), urls


def test_the_index_page_has_no_relative_link(built: Built) -> None:
    """The description is README.md with every link absolute; those into the repository name
    files that exist, and sections that exist (GitHub's heading anchors) of the README or of
    the document they point into."""
    description = built.metadata.get_payload()
    assert isinstance(description, str)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert description.count("](") == readme.count("](") > 0
    source = dict(
        (part.strip() for part in entry.split(",", 1))  # type: ignore[misc]
        for entry in built.metadata.get_all("Project-URL") or []
    )["Source"]
    anchors = {_github_anchor(h) for h in re.findall(r"^#+ (.+)$", readme, re.M)}
    targets = re.findall(r"\]\(([^)\s]+)\)", description)
    assert targets
    for target in targets:
        assert re.match(r"https?://", target), target
        if target.startswith(source + "/blob/main/"):
            path, _, fragment = target[len(source + "/blob/main/"):].partition("#")
            assert (ROOT / path).exists(), target
            if fragment:  # a section of another document: one of its headings
                headings = re.findall(r"^#+ (.+)$", (ROOT / path).read_text("utf-8"), re.M)
                assert fragment in {_github_anchor(h) for h in headings}, target
        elif target.startswith(source + "#"):
            assert target[len(source) + 1:] in anchors, target


def _github_anchor(heading: str) -> str:
    """The id GitHub gives a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
