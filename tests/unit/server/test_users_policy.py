"""The access policy (``users.decide``) and token hashing, without a server: every role
against every kind of action, and the messages a refused user reads."""

from __future__ import annotations

import pytest

from tandem.server.access import classify
from tandem.server.users import (
    Role,
    User,
    UserError,
    check_secret,
    decide,
    hash_secret,
)

ALICE = User("alice", Role.MEMBER)
VIC = User("vic", Role.VIEWER)
ROOT = User("root", Role.ADMIN)


@pytest.mark.parametrize("user, action, owner, write, allowed", [
    (ALICE, "jobs.stop", "alice", True, True),
    (ALICE, "jobs.stop", "bob", True, False),
    (ALICE, "jobs.submit", None, True, True),
    (ALICE, "models.alias", "bob", True, False),
    (ALICE, "users.add", None, True, False),
    (ALICE, "audit.list", None, False, False),
    (ALICE, "jobs.read", "bob", False, True),
    (VIC, "jobs.submit", None, True, False),
    (VIC, "jobs.stop", "vic", True, False),
    (VIC, "jobs.read", "bob", False, True),
    (ROOT, "jobs.stop", "bob", True, True),
    (ROOT, "users.add", None, True, True),
])
def test_each_role_against_each_kind_of_action(user, action, owner, write, allowed):
    d = decide(user, action, owner, "job j1", write)
    assert d.allowed is allowed
    if not allowed:
        assert user.name in d.reason  # the message names who asked
        if owner not in (None, user.name) and user.role is Role.MEMBER and not action.startswith(
                ("users.", "audit.")):
            assert f"job j1 belongs to {owner!r}" in d.reason


def test_tokens_are_hashed_with_a_salt_and_checked_in_constant_time():
    a, b = hash_secret("s3cret"), hash_secret("s3cret")
    assert a != b and a.startswith("pbkdf2_sha256$") and "s3cret" not in a  # salted
    assert check_secret("s3cret", a) and check_secret("s3cret", b)
    assert not check_secret("s3cret!", a)
    assert not check_secret("s3cret", "md5$1$00$00") and not check_secret("s3cret", "junk")


def test_roles_and_actions_are_read_strictly():
    assert Role.parse("Member") is Role.MEMBER
    with pytest.raises(UserError, match="admin, member, viewer"):
        Role.parse("root")
    assert classify("POST", "/api/jobs/j1/stop").name == "jobs.stop"
    assert classify("GET", "/api/jobs/j1/events", b"calls=true").name == "jobs.answer_calls"
    assert classify("GET", "/api/jobs/j1/events", b"calls=false") is None
    assert classify("GET", "/api/jobs") is None
    assert classify("DELETE", "/api/models/m/versions/3").target == "model m"
