"""A headless Chromium for the dashboard's browser tests: Debian's `chromium`, driven by
Selenium through the system `chromedriver` (`make chromium` installs both; nothing is
downloaded at run time), and `Page`, the browser on one dashboard with waits on what it shows.
Screenshots go to a fresh temporary directory whose path is printed (pytest -s shows it)."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from skiff.testing.waits import wait_for

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    assert CHROMIUM and CHROMEDRIVER, "Chromium and its driver are missing: run `make chromium`"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots() -> Path:
    """A directory of its own (pytest prunes its temporary directories while others run)."""
    path = Path(tempfile.mkdtemp(prefix="skiff-dashboard-screenshots-"))
    print(f"dashboard screenshots in {path}")
    return path


class Page:
    """The browser on one dashboard, with waits on what the page shows."""

    def __init__(self, driver: WebDriver, base: str, shots: Path) -> None:
        self.driver, self.base, self.shots = driver, base, shots

    def open(self, path: str) -> None:
        self.driver.get(self.base + path)

    def text(self, css: str) -> str:
        return self.driver.find_element(By.CSS_SELECTOR, css).text

    def fill(self, form: str, **fields: Any) -> None:
        for name, value in fields.items():
            el = self.driver.find_element(By.CSS_SELECTOR, f"{form} [name={name}]")
            el.clear()
            el.send_keys(str(value))
        self.driver.find_element(By.CSS_SELECTOR, f"{form} button").click()

    def wait_text(self, css: str, predicate: Any, what: str, timeout_s: float = 20.0, reload: bool = False) -> str:
        def check() -> str | None:
            if reload:
                self.driver.refresh()
            try:
                found = self.driver.find_elements(By.CSS_SELECTOR, css)
                text = found[0].text if found else ""
            except StaleElementReferenceException:
                return None
            except WebDriverException as exc:  # the page moved on between find and read: chromedriver's
                if "does not belong to the document" in str(exc):  # stale element, under another name
                    return None
                raise
            return text if predicate(text) else None
        try:
            return wait_for(check, timeout_s, what)
        except AssertionError:
            self.shot("failed")
            raise AssertionError(f"{what} did not happen within {timeout_s} s on {self.driver.current_url}:\n"
                                 f"{self.text('main')}") from None

    def result(self) -> Any:
        """The JSON an action answered (shown under the page), once it is there."""
        self.wait_text("#flash", lambda t: t, "the action's answer")
        assert "ok" in self.driver.find_element(By.ID, "flash").get_attribute("class"), self.text("#flash")
        return json.loads(self.driver.find_element(By.ID, "result").get_attribute("textContent"))

    def shot(self, name: str) -> None:
        self.driver.save_screenshot(str(self.shots / f"{name}.png"))
