"""Session servers for the service tests: the cited pages, the scripted upstream, and one
citeguard service (API key ``sk-citeguard``) in front of it. See servers.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from serve.dated import DatedPages
from serve.servers import FakeUpstream, Loop, Pages, Service, make_settings, serve_policy


@pytest.fixture(scope="session")
def bg_loop() -> Iterator[Loop]:
    loop = Loop()
    yield loop
    loop.stop()


@pytest.fixture(scope="session")
def pages(bg_loop: Loop) -> Iterator[Pages]:
    p = Pages(bg_loop)
    yield p
    p.close()


@pytest.fixture(scope="session")
def upstream_server(bg_loop: Loop) -> Iterator[FakeUpstream]:
    u = FakeUpstream(bg_loop)
    yield u
    u.close()


@pytest.fixture
def upstream(upstream_server: FakeUpstream) -> FakeUpstream:
    upstream_server.script("Hello.")
    return upstream_server


@pytest.fixture(scope="session")
def service(upstream_server: FakeUpstream) -> Iterator[Service]:
    s = Service(make_settings(upstream_server))
    yield s
    s.close()


@pytest.fixture(scope="session")
def raising_service(upstream_server: FakeUpstream) -> Iterator[Service]:
    """on_fail="raise": a rejected answer is a 422 in the API's shape."""
    s = Service(
        make_settings(
            upstream_server, policy=serve_policy().replace(on_fail="raise", max_attempts=2)
        )
    )
    yield s
    s.close()


@pytest.fixture(scope="session")
def returning_service(upstream_server: FakeUpstream) -> Iterator[Service]:
    """on_fail="return", the explicit opt-in: a rejected answer comes back as the upstream
    ended it, only the verdict saying it failed."""
    s = Service(make_settings(upstream_server, policy=serve_policy().replace(on_fail="return")))
    yield s
    s.close()


@pytest.fixture(scope="session")
def dated(bg_loop: Loop) -> Iterator[DatedPages]:
    """Pages dated 90 days and 3 days ago (serve.dated)."""
    p = DatedPages(bg_loop)
    yield p
    p.close()


@pytest.fixture(scope="session")
def fresh_service(upstream_server: FakeUpstream) -> Iterator[Service]:
    """The freshness axis on, entailment off: a stale source is what decides (issue 45)."""
    policy = serve_policy().replace(
        freshness={"enabled": True}, entailment={"check_entailment": False}
    )
    s = Service(make_settings(upstream_server, policy=policy))
    yield s
    s.close()
