"""ACL users through redis-py: its acl_* helpers, username/password connections (AUTH and
HELLO 3 AUTH), the NOPERM errors a restricted user sees, and the ACL log it reads."""

import pytest
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from atoll_proc import atoll, free_port


@pytest.fixture(scope="module")
def port():
    p = free_port()
    with atoll(p, "--threads", "2"):
        yield p


@pytest.mark.parametrize("protocol", [2, 3])
def test_users_permissions_and_log(port, protocol):
    admin = redis.Redis(port=port, protocol=protocol, decode_responses=True)
    admin.acl_log_reset()
    assert admin.acl_setuser("app", enabled=True, passwords=["+s3cret"], keys=["app:*"],
                             channels=["app.*"], commands=["+@read", "+@write", "-flushdb", "+publish", "+acl|whoami"],
                             reset=True)
    u = admin.acl_getuser("app")
    assert "on" in u["flags"]
    assert "~app:*" in str(u["keys"])
    assert "app" in admin.acl_users()
    assert admin.acl_whoami() == "default"
    assert admin.acl_dryrun("app", "get", "other") == "User app has no permissions to access the 'other' key"

    # No retries: a refused login is final (redis-py would otherwise back off and try again).
    once = Retry(NoBackoff(), 0)
    app = redis.Redis(port=port, protocol=protocol, username="app", password="s3cret", decode_responses=True,
                      retry=once)
    assert app.acl_whoami() == "app"
    assert app.set("app:1", "x") is True
    assert app.get("app:1") == "x"
    with pytest.raises(redis.exceptions.NoPermissionError, match="No permissions to access a key"):
        app.get("secret")
    with pytest.raises(redis.exceptions.NoPermissionError, match="has no permissions to run the 'flushdb'"):
        app.flushdb()
    with pytest.raises(redis.exceptions.NoPermissionError, match="No permissions to access a channel"):
        app.publish("other", "m")
    assert app.publish("app.events", "m") == 0

    with pytest.raises(redis.exceptions.AuthenticationError):
        redis.Redis(port=port, protocol=protocol, username="app", password="wrong", retry=once).ping()

    log = admin.acl_log()
    reasons = {(e["reason"], e["object"]) for e in log}
    assert ("key", "secret") in reasons
    assert ("command", "flushdb") in reasons
    assert ("channel", "other") in reasons
    assert ("auth", "AUTH") in reasons or ("auth", "HELLO") in reasons
    assert all(e["username"] == "app" for e in log)

    assert admin.acl_deluser("app") == 1
    with pytest.raises(redis.exceptions.ConnectionError):
        app.get("app:1")
