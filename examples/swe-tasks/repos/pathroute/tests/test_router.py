import pytest

from pathroute import BuildError, NotFound, Router


@pytest.fixture
def router():
    r = Router()
    r.add("/", "index")
    r.add("/users/<int:user_id>", "show_user", methods=["GET"])
    r.add("/users/<int:user_id>", "update_user", methods=["PUT"])
    r.add("/tags/<name>", "tag")
    return r


def test_match_first_route(router):
    m = router.match("GET", "/users/42")
    assert (m.endpoint, m.params) == ("show_user", {"user_id": 42})


def test_same_path_other_method(router):
    assert router.match("put", "/users/1").endpoint == "update_user"


def test_head_is_served_by_get_routes(router):
    assert router.match("HEAD", "/").endpoint == "index"


def test_unknown_path_is_not_found(router):
    with pytest.raises(NotFound) as info:
        router.match("GET", "/nope")
    assert info.value.status == 404


def test_url_for(router):
    assert router.url_for("show_user", user_id=3) == "/users/3"
    assert router.url_for("index") == "/"


def test_url_for_errors(router):
    with pytest.raises(BuildError):
        router.url_for("missing")
    with pytest.raises(BuildError):
        router.url_for("show_user")
