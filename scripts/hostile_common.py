"""Shared by the hostile-input generators of scripts/hostile-campaign.sh (hostile_inputs.py,
hostile_plugin_inputs.py): the manifest each class writes and the quick-mode selection."""
import os


def manifest(out, rows):
    with open(os.path.join(out, "manifest.tsv"), "w") as f:
        for row in rows:
            f.write("\t".join(str(c) for c in row) + "\n")


def pick(rows, quick, keep):
    """In quick mode keep only the named rows (a smoke test), in order."""
    if not quick:
        return rows
    return [r for r in rows if r[0] in keep]
