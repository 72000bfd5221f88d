"""The training corpus and the held-out evaluation text.

Training text is exactly two things, both shipped by Debian 12 under the PSF licence (a few
standard library modules under other permissive licences, listed in the package's copyright file):
  code: the .py files of the Python 3.11 standard library, as installed by the packages
        libpython3.11-stdlib and libpython3.11-minimal under /usr/lib/python3.11
        (the files `dpkg -L` lists for them, nothing else that happens to sit there);
  docs: the reStructuredText sources of the Python documentation, shipped by python3-doc
        (through its dependency python3.11-doc) as /usr/share/doc/python3.11/html/_sources/*.rst.txt.
A file is one document. Documents are sorted by path so that the corpus, and everything
derived from it, does not depend on the order the file system lists them in.

Held-out text is code that is in neither: this project's own Python (HELDOUT_FILES), read at
training time and written next to the model so the evaluation can be repeated exactly.
"""

import hashlib
import os
import subprocess

CODE_PACKAGES = ("libpython3.11-stdlib", "libpython3.11-minimal")
DOC_PACKAGES = ("python3-doc", "python3.11-doc")
CODE_ROOT = "/usr/lib/python3.11/"
DOC_ROOT = "/usr/share/doc/python3.11/html/_sources/"
# Paths relative to the repository root. Python written for this project, so not part of the
# standard library or its documentation.
HELDOUT_FILES = (
    "tools/reference/llama_ref.py",
    "tools/train/bpe.py",
    "tools/train/corpus.py",
    "tools/train/export.py",
    "tools/train/model.py",
    "tools/train/train.py",
)


class Document:
    __slots__ = ("path", "kind", "text")

    def __init__(self, path, kind, text):
        self.path = path
        self.kind = kind  # "code" | "docs"
        self.text = text


def package_files(package):
    """Every path dpkg lists for an installed package; a clear error when it is not installed."""
    try:
        out = subprocess.run(["dpkg", "-L", package], check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"corpus: package {package} is not installed (run scripts/bootstrap.sh): {e}")
    return out.splitlines()


def package_version(package):
    out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def read_text(path):
    with open(path, "rb") as f:
        data = f.read()
    # Every file of both packages is UTF-8; refuse silently mangled input.
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SystemExit(f"corpus: {path} is not UTF-8 ({e})")


def installed_files(packages, root, suffix):
    """The regular files under `root` ending in `suffix` that dpkg lists for `packages`, sorted."""
    paths = set()
    for p in packages:
        for f in package_files(p):
            if f.startswith(root) and f.endswith(suffix) and os.path.isfile(f):
                paths.add(f)
    return sorted(paths)


def load_corpus():
    """All training documents, code first, each group sorted by path."""
    docs = [Document(p, "code", read_text(p)) for p in installed_files(CODE_PACKAGES, CODE_ROOT, ".py")]
    docs += [Document(p, "docs", read_text(p)) for p in installed_files(DOC_PACKAGES, DOC_ROOT, ".rst.txt")]
    if not any(d.kind == "code" for d in docs) or not any(d.kind == "docs" for d in docs):
        raise SystemExit("corpus: no code or no documentation found (are the packages installed?)")
    return docs


def describe(docs):
    """Sizes, package versions and a content hash, for the model card."""
    h = hashlib.sha256()
    stats = {}
    for d in docs:
        h.update(d.path.encode() + b"\0" + d.text.encode() + b"\0")
        s = stats.setdefault(d.kind, {"files": 0, "bytes": 0})
        s["files"] += 1
        s["bytes"] += len(d.text.encode())
    return {
        "sha256": h.hexdigest(),
        "groups": stats,
        "packages": {p: package_version(p) for p in CODE_PACKAGES + DOC_PACKAGES},
    }


def load_heldout(repo_root):
    """The held-out text: HELDOUT_FILES joined, each preceded by a comment naming it."""
    parts = []
    for rel in HELDOUT_FILES:
        parts.append(f"# ---- {rel}\n" + read_text(os.path.join(repo_root, rel)))
    return "\n".join(parts)
