"""`jfsm driver --http PORT --metrics`: `GET /metrics` in Prometheus' text format (issue 40,
decision R210), with every metric the engine records, behind the driver's own checks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from driver_helpers import HttpDriver

from jfsm_conformance.fake.compress import FakeCompress

pytestmark = pytest.mark.req("JF-CALL-023")


@pytest.fixture
def metrics_driver() -> Iterator[HttpDriver]:
    driver = HttpDriver(extra=("--metrics",))
    try:
        yield driver
    finally:
        driver.close()


def test_metrics_are_prometheus_text_of_the_engines_metrics(metrics_driver: HttpDriver) -> None:
    driver = metrics_driver
    with FakeCompress() as fake:
        hello = {"protocol": 1, "compressUrl": fake.url, "thresholds": {"game": 100}}
        assert driver.call("hello", hello)["ok"]
        assert driver.call("create_game", {"game": "g"})["ok"]
        for n in range(4):
            driver.call("record_round", {"game": "g", "input": "i" * 40, "output": f"o{n}" * 20})
            assert driver.call("generate", {"game": "g"})["ok"]
    scraped = driver.client.get(driver.url + "/metrics", headers=driver.headers())
    assert scraped.status_code == 200
    assert scraped.headers["content-type"].startswith("text/plain; version=")
    text = scraped.text
    for family in (
        "# TYPE jfsm_compressions_total counter",
        "# TYPE jfsm_compress_attempt_duration_seconds histogram",
        "# TYPE jfsm_store_commit_duration_seconds histogram",
        "# TYPE jfsm_store_footprint_bytes histogram",
        "# TYPE jfsm_store_quota_headroom_bytes histogram",
    ):
        assert family in text, family
    published = [
        line
        for line in text.splitlines()
        if line.startswith("jfsm_compressions_total{")
        and 'jfsm_compression_outcome="published"' in line
    ]
    assert published and float(published[0].rsplit(" ", 1)[1]) >= 1


def test_metrics_need_the_token_and_get(metrics_driver: HttpDriver) -> None:
    url = metrics_driver.url + "/metrics"
    assert metrics_driver.client.get(url).status_code == 401
    posted = metrics_driver.client.post(url, headers=metrics_driver.headers(), content=b"{}")
    assert posted.status_code == 405


def test_without_the_flag_there_is_no_metrics_path() -> None:
    driver = HttpDriver()
    try:
        response = driver.client.get(driver.url + "/metrics", headers=driver.headers())
        assert response.status_code == 405  # the only resource is POST /v1/message
    finally:
        driver.close()
