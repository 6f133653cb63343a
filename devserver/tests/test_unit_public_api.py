import dex_devserver


def test_public_api_is_pinned() -> None:
    assert dex_devserver.__all__ == ["DevServer", "ServerOptions", "main"]
    assert sorted(dex_devserver.__all__) == dex_devserver.__all__
