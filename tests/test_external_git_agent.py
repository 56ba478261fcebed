"""The cooperating agent's Git steps (``backends.external.git``) on a real repository: a commit says it
committed a publication only when the commit holds exactly that publication's bytes. The program under
test writes item files without the agents' lock, so it may write a later publication over the file
between the agent's check of the bytes and its ``git add``; that commit holds the later bytes."""

from __future__ import annotations

import subprocess

from backends.external import git

REL = "ledger-1/item.md"


def _repo(tmp_path):
    repo = tmp_path / "repo"
    (repo / "ledger-1").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / REL).write_bytes(b"seed\n")
    git.commit_paths(str(repo), [REL], "seed")
    return repo


def test_a_commit_of_its_own_bytes_says_committed(tmp_path):
    repo = _repo(tmp_path)
    (repo / REL).write_bytes(b"one\n")
    r = git.commit_item(str(repo), REL, git.revision(b"one\n"), "p1", str(tmp_path / "lock"))
    assert r["committed"] is True and r["head_revision"] == git.revision(b"one\n") and r["git_commit"]


def test_bytes_replaced_before_the_commit_are_not_reported_as_this_publications(tmp_path, monkeypatch):
    repo = _repo(tmp_path)
    (repo / REL).write_bytes(b"one\n")
    real_commit_paths = git.commit_paths

    def program_writes_first(repo_, paths, message):   # the program's next publication, in the window
        (repo / REL).write_bytes(b"two\n")
        return real_commit_paths(repo_, paths, message)

    monkeypatch.setattr(git, "commit_paths", program_writes_first)
    r = git.commit_item(str(repo), REL, git.revision(b"one\n"), "p1", str(tmp_path / "lock"))
    assert r["committed"] is False and r["reason"] == "superseded"
    assert r["head_revision"] == git.revision(b"two\n") and r["git_commit"] == git.head(str(repo))
    assert git.head_bytes(str(repo), REL) == b"two\n"   # a real commit, of the later bytes
