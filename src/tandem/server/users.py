"""Users, roles, owners and the audit log of a train server (``docs/users.md``).

* ``AccountStore``: the tables ``tandem_users`` (name, role, the token's id and its salted
  PBKDF2 hash: a token is shown once and never stored), ``tandem_owners`` (who created a
  registered model or an experiment folder), ``tandem_audit`` (who did what to which object,
  when, and the outcome), ``tandem_quotas`` (per-user quotas set over HTTP),
  ``tandem_groups`` (which group each user is in) and ``tandem_group_quotas``, in the
  server's own database (``--db``: SQLite or PostgreSQL). Alembic migrates an older store
  (``tandem.jobs.store.migrate``), so a store written before users existed opens as it is.
* ``Role`` / ``User``: ``admin`` (everything, the server's own token is the admin
  ``admin``), ``member`` (submits; stops, deletes, aliases and re-serves only what it
  owns), ``viewer`` (reads only).
* ``decide``: the access policy, a pure function from (user, action, owner) to an
  ``AccessDecision``; ``access.py`` applies it to every request.
"""

from __future__ import annotations

import enum
import hashlib
import json
import os
import random
import re
import secrets
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc
from sqlalchemy.engine import Connection, Engine

from tandem._core.errors import TandemError
from tandem.jobs.store.engine import is_lock_error, normalize_url, open_engine, transaction
from tandem.jobs.store.migrate import Lineage, folder_of, migrate

__all__ = [
    "ADMIN",
    "AccessDecision",
    "AccountStore",
    "AuditEntry",
    "Role",
    "User",
    "UserError",
    "decide",
]

T = TypeVar("T")

#: The user of the server's own token (``~/.tandem/server.json``): always an admin.
ADMIN = "admin"
PBKDF2_ITERATIONS = 120_000
TOKEN_PREFIX = "tdm"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,63}")
_AUTH_TTL_S = 30.0  # a checked token is trusted this long before its row is read again


class UserError(TandemError, ValueError):
    """A request about users that cannot be carried out (the message says why)."""


class Role(str, enum.Enum):
    """What a user may do. ``admin``: everything; ``member``: read everything, create jobs,
    models and deployments, and change only its own; ``viewer``: read only."""

    ADMIN = "admin"
    MEMBER = "member"
    VIEWER = "viewer"

    @property
    def can_write(self) -> bool:
        return self is not Role.VIEWER

    @classmethod
    def parse(cls, value: str) -> Role:
        try:
            return cls(str(value).lower())
        except ValueError:
            raise UserError(f"role {value!r} is not one of admin, member, viewer; "
                            f"give --role member (or admin, viewer)") from None


@dataclass(frozen=True)
class User:
    """An authenticated user (what a request runs as)."""

    name: str
    role: Role

    @property
    def is_admin(self) -> bool:
        return self.role is Role.ADMIN


@dataclass(frozen=True)
class AccessDecision:
    """What ``decide`` returns: allowed, or refused with the reason a user reads (403)."""

    allowed: bool
    reason: str = ""


#: Actions only an admin takes (users, groups, audit, quotas).
ADMIN_ACTIONS = frozenset({"users.add", "users.revoke", "users.list", "users.set_role",
                           "users.set_group", "audit.list", "quotas.set", "quotas.delete"})


def decide(user: User, action: str, owner: str | None, target: str | None = None,
           write: bool = True) -> AccessDecision:
    """The access policy.

    Args:
        user: who asks.
        action: what it does (``jobs.stop``, ``models.alias``, ``users.add``, ...).
        owner: the owner of the object acted on (None: a new object, or none at all).
        target: the object, for the message (``job job_...``, ``model digits``).
        write: False for a read.

    Returns:
        Allowed, or refused with a message that names the rule (and the owner).
    """
    if user.is_admin:
        return AccessDecision(True)
    if action in ADMIN_ACTIONS:
        return AccessDecision(False, f"{action} is for admins; user {user.name!r} is a "
                                     f"{user.role.value}. Ask an admin (the server's own "
                                     f"token is the admin's).")
    if not write:
        return AccessDecision(True)
    if not user.role.can_write:
        return AccessDecision(False, f"user {user.name!r} is a viewer and may only read; "
                                     f"{action} needs a member's token (an admin gives one "
                                     f"with `tandem users add NAME --role member`).")
    if owner is not None and owner != user.name:
        what = target or "this object"
        return AccessDecision(False, f"{what} belongs to {owner!r}; user {user.name!r} "
                                     f"(member) may change only its own. Ask {owner!r} or "
                                     f"an admin.")
    return AccessDecision(True)


@dataclass(frozen=True)
class AuditEntry:
    """One line of the audit log."""

    id: int
    time: float
    user: str
    action: str
    target: str | None
    outcome: str
    status: int
    detail: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "time": self.time, "user": self.user, "action": self.action,
                "target": self.target, "outcome": self.outcome, "status": self.status,
                "detail": self.detail}


# --------------------------------------------------------------------------- tables

_meta = sa.MetaData()
_BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

users_table = sa.Table(
    "tandem_users", _meta,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("token_id", sa.String(32), nullable=False, unique=True),
    sa.Column("token_hash", sa.Text, nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
    sa.Column("created_by", sa.String(64), nullable=True),
    sa.Column("revoked_at", sa.Float, nullable=True),
)
owners_table = sa.Table(
    "tandem_owners", _meta,
    sa.Column("kind", sa.String(16), primary_key=True),
    sa.Column("key", sa.String(1024), primary_key=True),
    sa.Column("owner", sa.String(64), nullable=False),
    sa.Column("created_at", sa.Float, nullable=False),
)
audit_table = sa.Table(
    "tandem_audit", _meta,
    sa.Column("id", _BigId, primary_key=True, autoincrement=True),
    sa.Column("time", sa.Float, nullable=False),
    sa.Column("user", sa.String(64), nullable=False),
    sa.Column("action", sa.String(64), nullable=False),
    sa.Column("target", sa.Text, nullable=True),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("status", sa.Integer, nullable=False),
    sa.Column("detail", sa.Text, nullable=True),
    sa.Index("ix_tandem_audit_time", "time"),
    sa.Index("ix_tandem_audit_user", "user", "time"),
)
quotas_table = sa.Table(
    "tandem_quotas", _meta,
    sa.Column("owner", sa.String(64), primary_key=True),
    sa.Column("quota", sa.Text, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

groups_table = sa.Table(
    "tandem_groups", _meta,
    sa.Column("user", sa.String(64), primary_key=True),
    sa.Column("grp", sa.String(64), nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)
group_quotas_table = sa.Table(
    "tandem_group_quotas", _meta,
    sa.Column("grp", sa.String(64), primary_key=True),
    sa.Column("quota", sa.Text, nullable=False),
    sa.Column("updated_at", sa.Float, nullable=False),
)

#: The users store's Alembic revisions (``tandem.jobs.store.migrate``); the tables above are
#: the schema at ``head``.
LINEAGE = Lineage(
    name="users store",
    folder=folder_of(__file__),
    version_table="tandem_alembic_users",
    head="users_0002",
    baseline="users_0001",
    tables=("tandem_users", "tandem_owners", "tandem_audit", "tandem_quotas"),
    # (not ...501, the jobs schema's, nor ...502, the store owner's lock)
    advisory_lock=7460110511,
    metadata=_meta,
)


def hash_secret(secret: str, salt: bytes | None = None,
                iterations: int = PBKDF2_ITERATIONS) -> str:
    """``pbkdf2_sha256$ITERATIONS$SALT$HASH`` (hex) of a token's secret."""
    salt = salt if salt is not None else os.urandom(16)
    digest = hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, iterations)
    return f"pbkdf2_sha256${iterations}${salt.hex()}${digest.hex()}"


def check_secret(secret: str, stored: str) -> bool:
    """True when ``secret`` hashes to ``stored`` (compared in constant time)."""
    try:
        scheme, iterations, salt, digest = stored.split("$")
        if scheme != "pbkdf2_sha256":
            return False
        got = hashlib.pbkdf2_hmac("sha256", secret.encode(), bytes.fromhex(salt),
                                  int(iterations))
    except (ValueError, TypeError):
        return False
    return secrets.compare_digest(got.hex(), digest)


def check_name(name: object) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UserError(f"user name {name!r:.80} is not allowed: use a letter, then up to 63 "
                        f"letters, digits, '_', '.' or '-' (e.g. alice, bob.smith)")
    return name


def check_group(group: object) -> str:
    if not isinstance(group, str) or not _NAME.fullmatch(group):
        raise UserError(f"group name {group!r:.80} is not allowed: use a letter, then up to "
                        f"63 letters, digits, '_', '.' or '-' (e.g. ml, vision-team)")
    return group


class AccountStore:
    """Users, owners, the audit log and quotas in a SQL database (see the module docstring).

    Thread-safe; several processes may open the same database (the CLI reads the audit
    log through the server, never directly). Tokens are checked against their PBKDF2 hash;
    a token checked once is trusted for ``_AUTH_TTL_S`` seconds (a revocation through this
    object takes effect at once).

    Args:
        db_url: the server's database (``sqlite:////abs/jobs.db``, ``postgresql://...``).
        admin_token: the server's own token: it authenticates as the admin ``admin``.
    """

    def __init__(self, db_url: str, admin_token: str | None = None,
                 busy_timeout_s: float = 10.0) -> None:
        self.db_url = normalize_url(db_url)
        self._admin_token = admin_token
        opened = open_engine(self.db_url, busy_timeout_s=busy_timeout_s,
                             what="The train server's database URL")
        self._engine: Engine = opened.engine
        self._dialect = opened.dialect
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[User, float]] = {}
        migrate(lambda fn, write: self._run(fn, write=write), LINEAGE,
                dialect=self._dialect, store=repr(self))

    def close(self) -> None:
        self._engine.dispose()

    def __repr__(self) -> str:
        return f"AccountStore({self._engine.url.render_as_string(hide_password=True)!r})"

    # ----------------------------------------------------------------- plumbing

    def _run(self, fn: Callable[[Connection], T], *, write: bool) -> T:
        deadline = time.monotonic() + 30.0
        delay = 0.005
        while True:
            try:
                with transaction(self._engine, write) as conn:
                    return fn(conn)
            except exc.IntegrityError:
                raise
            except exc.DBAPIError as e:
                # two servers creating the tables at once: try again as for a lock
                retry = is_lock_error(e) or "already exists" in str(getattr(e, "orig", e)).lower()
                if not retry or time.monotonic() > deadline:
                    from tandem.jobs.store import JobStoreError

                    raise JobStoreError(f"{self!r} failed: {getattr(e, 'orig', e)}") from e
                time.sleep(delay * (0.5 + random.random()))
                delay = min(delay * 2, 0.25)

    # ----------------------------------------------------------------- users

    def add_user(self, name: str, role: Role | str, created_by: str = ADMIN) -> str:
        """Adds (or re-adds a revoked) user; returns its token, which is shown only now.

        Raises:
            UserError: a bad name or role, the name ``admin``, or a user that exists.
        """
        name = check_name(name)
        role = Role.parse(role) if not isinstance(role, Role) else role
        if name == ADMIN:
            raise UserError(f"{ADMIN!r} is the user of the server's own token; give the new "
                            f"user another name (it may have --role admin)")
        token_id = secrets.token_hex(8)
        secret = secrets.token_urlsafe(32)
        token = f"{TOKEN_PREFIX}_{token_id}_{secret}"
        row = {"role": role.value, "token_id": token_id, "token_hash": hash_secret(secret),
               "created_at": time.time(), "created_by": created_by, "revoked_at": None}

        def fn(conn: Connection) -> None:
            found = conn.execute(sa.select(users_table.c.revoked_at)
                                 .where(users_table.c.name == name)).first()
            if found is None:
                conn.execute(users_table.insert().values(name=name, **row))
            elif found.revoked_at is not None:
                conn.execute(users_table.update().where(users_table.c.name == name)
                             .values(**row))
            else:
                raise UserError(f"user {name!r} exists already; revoke it first "
                                f"(`tandem users revoke {name}`) to give it a new token")

        self._run(fn, write=True)
        return token

    def revoke(self, name: str) -> dict[str, object]:
        """Revokes a user's token at once (its objects keep their owner).

        Raises:
            UserError: no such (active) user, or ``admin``.
        """
        if name == ADMIN:
            raise UserError(f"{ADMIN!r} is the server's own token; change it by restarting "
                            f"the server with a new TANDEM_TOKEN (or a new <storage>/token)")

        def fn(conn: Connection) -> None:
            done = conn.execute(users_table.update().where(
                (users_table.c.name == name) & users_table.c.revoked_at.is_(None))
                .values(revoked_at=time.time())).rowcount
            if not done:
                raise UserError(f"no active user {name!r}; `tandem users list` shows them")

        self._run(fn, write=True)
        with self._lock:
            self._cache.clear()
        return {"name": name, "revoked": True}

    def set_role(self, name: str, role: Role | str) -> dict[str, object]:
        """Changes an active user's role in place (its token stays); takes effect at once.

        Raises:
            UserError: ``admin``, a bad role, or no such active user.
        """
        role = Role.parse(role) if not isinstance(role, Role) else role
        if name == ADMIN:
            raise UserError(f"{ADMIN!r} is the server's own token and always an admin")

        def fn(conn: Connection) -> str:
            found = conn.execute(sa.select(users_table.c.role).where(
                (users_table.c.name == name) & users_table.c.revoked_at.is_(None))).first()
            if found is None:
                raise UserError(f"no active user {name!r}; `tandem users list` shows them")
            conn.execute(users_table.update().where(users_table.c.name == name)
                         .values(role=role.value))
            return str(found.role)

        old = self._run(fn, write=True)
        with self._lock:
            self._cache.clear()
        return {"name": name, "role": role.value, "was": old}

    def set_group(self, name: str, group: str | None) -> None:
        """Puts user ``name`` in ``group`` (None: in none); a user is in one group at most.

        Raises:
            UserError: a bad group name, or no such user.
        """
        if group is not None:
            check_group(group)

        def fn(conn: Connection) -> None:
            if name != ADMIN and conn.execute(sa.select(users_table.c.name).where(
                    users_table.c.name == name)).first() is None:
                raise UserError(f"no user {name!r}; `tandem users list` shows them")
            conn.execute(groups_table.delete().where(groups_table.c.user == name))
            if group is not None:
                conn.execute(groups_table.insert().values(user=name, grp=group,
                                                          updated_at=time.time()))

        self._run(fn, write=True)

    def groups(self) -> dict[str, str]:
        """``{user: group}`` of every user in a group."""
        rows = self._run(lambda conn: list(conn.execute(sa.select(groups_table))),
                         write=False)
        return {r.user: r.grp for r in rows}

    def users(self) -> list[dict[str, Any]]:
        """Every user, oldest first (``admin`` first), without tokens or hashes."""
        def fn(conn: Connection) -> list[Any]:
            return list(conn.execute(sa.select(
                users_table.c.name, users_table.c.role, users_table.c.created_at,
                users_table.c.created_by, users_table.c.revoked_at)
                .order_by(users_table.c.created_at)))

        rows = self._run(fn, write=False)
        groups = self.groups()
        return [{"name": ADMIN, "role": "admin", "created_at": None, "created_by": None,
                 "revoked_at": None, "group": groups.get(ADMIN),
                 "token": "the server's own token"}] + [
            {"name": r.name, "role": r.role, "created_at": r.created_at,
             "created_by": r.created_by, "revoked_at": r.revoked_at,
             "group": groups.get(r.name)} for r in rows]

    def has_users(self) -> bool:
        """True once a user other than ``admin`` was ever added."""
        return bool(self._run(lambda conn: conn.execute(
            sa.select(users_table.c.name).limit(1)).first(), write=False))

    def authenticate(self, token: str | bytes | None) -> User | None:
        """The user a token belongs to, or None (a wrong, malformed or revoked token)."""
        if not token:
            return None
        if isinstance(token, bytes):
            token = token.decode("utf-8", "replace")
        if self._admin_token is not None and secrets.compare_digest(
                token.encode("utf-8", "replace"), self._admin_token.encode()):
            return User(ADMIN, Role.ADMIN)
        parts = token.split("_", 2)
        if len(parts) != 3 or parts[0] != TOKEN_PREFIX or len(token) > 200:
            return None
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and hit[1] > now:
            return hit[0]
        token_id, secret = parts[1], parts[2]
        row = self._run(lambda conn: conn.execute(
            sa.select(users_table).where(users_table.c.token_id == token_id)).first(),
            write=False)
        if row is None or row.revoked_at is not None or not check_secret(secret,
                                                                        row.token_hash):
            return None
        user = User(row.name, Role(row.role))
        with self._lock:
            if len(self._cache) > 10_000:
                self._cache.clear()
            self._cache[key] = (user, now + _AUTH_TTL_S)
        return user

    # ----------------------------------------------------------------- owners

    def claim(self, kind: str, key: str, owner: str) -> str:
        """Records ``owner`` for an object unless it has one; returns the owner it has."""
        def fn(conn: Connection) -> str:
            found = conn.execute(sa.select(owners_table.c.owner).where(
                (owners_table.c.kind == kind) & (owners_table.c.key == key))).scalar()
            if found is not None:
                return str(found)
            conn.execute(owners_table.insert().values(kind=kind, key=key, owner=owner,
                                                      created_at=time.time()))
            return owner

        try:
            return self._run(fn, write=True)
        except exc.IntegrityError:  # another request claimed it first
            return self.owner(kind, key) or owner

    def owner(self, kind: str, key: str) -> str | None:
        """The recorded owner of an object, or None."""
        return self.owners(kind, [key]).get(key)

    def owners(self, kind: str, keys: Iterable[str]) -> dict[str, str]:
        """The recorded owners of several objects of one kind (those that have one)."""
        wanted = list(dict.fromkeys(keys))
        if not wanted:
            return {}

        def fn(conn: Connection) -> dict[str, str]:
            out: dict[str, str] = {}
            for i in range(0, len(wanted), 500):
                rows = conn.execute(sa.select(owners_table.c.key, owners_table.c.owner).where(
                    (owners_table.c.kind == kind)
                    & owners_table.c.key.in_(wanted[i:i + 500])))
                out.update({r.key: r.owner for r in rows})
            return out

        return self._run(fn, write=False)

    # ----------------------------------------------------------------- audit

    def audit(self, user: str, action: str, target: str | None, status: int,
              detail: str | None = None) -> None:
        """Appends one entry (``outcome``: ok below 400, denied on 401/403, else failed)."""
        outcome = "ok" if status < 400 else ("denied" if status in (401, 403) else "failed")
        row = {"time": time.time(), "user": user[:64], "action": action[:64],
               "target": None if target is None else target[:1024], "outcome": outcome,
               "status": int(status), "detail": None if detail is None else detail[:2000]}
        self._run(lambda conn: conn.execute(audit_table.insert().values(**row)), write=True)

    def audit_log(self, *, user: str | None = None, action: str | None = None,
                  since: float | None = None, limit: int = 100,
                  after_id: int | None = None) -> list[AuditEntry]:
        """Entries newest first (or, with ``after_id``, those after it, oldest first)."""
        def fn(conn: Connection) -> list[Any]:
            q = sa.select(audit_table)
            if user is not None:
                q = q.where(audit_table.c.user == user)
            if action is not None:
                q = q.where(audit_table.c.action == action)
            if since is not None:
                q = q.where(audit_table.c.time > since)
            if after_id is not None:
                q = q.where(audit_table.c.id > after_id).order_by(audit_table.c.id)
            else:
                q = q.order_by(audit_table.c.id.desc())
            return list(conn.execute(q.limit(limit)))

        return [AuditEntry(int(r.id), float(r.time), r.user, r.action, r.target, r.outcome,
                           int(r.status), r.detail) for r in self._run(fn, write=False)]

    # ----------------------------------------------------------------- quotas

    def set_quota(self, owner: str, quota: Mapping[str, object] | None) -> None:
        """Stores (None: removes) an owner's quota, so a restarted server applies it."""
        def fn(conn: Connection) -> None:
            conn.execute(quotas_table.delete().where(quotas_table.c.owner == owner))
            if quota is not None:
                conn.execute(quotas_table.insert().values(
                    owner=owner, quota=json.dumps(quota), updated_at=time.time()))

        self._run(fn, write=True)

    def quotas(self) -> dict[str, dict[str, Any]]:
        rows = self._run(lambda conn: list(conn.execute(sa.select(quotas_table))),
                         write=False)
        return {r.owner: json.loads(r.quota) for r in rows}

    def set_group_quota(self, group: str, quota: Mapping[str, object] | None) -> None:
        """Stores (None: removes) a group's quota, so a restarted server applies it."""
        check_group(group)

        def fn(conn: Connection) -> None:
            conn.execute(group_quotas_table.delete().where(group_quotas_table.c.grp == group))
            if quota is not None:
                conn.execute(group_quotas_table.insert().values(
                    grp=group, quota=json.dumps(quota), updated_at=time.time()))

        self._run(fn, write=True)

    def group_quotas(self) -> dict[str, dict[str, Any]]:
        rows = self._run(lambda conn: list(conn.execute(sa.select(group_quotas_table))),
                         write=False)
        return {r.grp: json.loads(r.quota) for r in rows}


def experiment_key(path: str) -> str:
    """The owners-table key of an experiment (or run) folder."""
    return os.path.normpath(os.path.abspath(path))


def claim_run_folder(accounts: AccountStore, rec: Any) -> None:
    """The first job that writes into a folder makes its owner the folder's: a Tune
    experiment's folder is its first trial's parent, so the experiment is that user's."""
    spec_json = rec.spec_json or {}
    owner = spec_json.get("owner")
    run_path = (spec_json.get("metadata") or {}).get("run_path")
    if not owner or not run_path or "://" in str(run_path):
        return
    path = str(run_path).rstrip("/")
    try:
        for folder in (path, os.path.dirname(path)):  # the run's, its experiment's
            accounts.claim("folder", experiment_key(folder), str(owner))
    except Exception:  # noqa: BLE001 - the job is queued; its folder shows no owner
        import logging

        logging.getLogger(__name__).exception("could not record the owner of %s", run_path)
