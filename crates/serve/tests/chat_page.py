"""Headless Chromium, driven over WebDriver (Selenium), opens the chat page, sends a message and
reads the reply as the page streams it; saves a screenshot.

usage: chat_page.py PAGE_URL CHROMEDRIVER SCREENSHOT.png
"""
import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

url, driver_path, shot = sys.argv[1], sys.argv[2], sys.argv[3]
options = webdriver.ChromeOptions()
for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--window-size=1000,700"):
    options.add_argument(arg)
options.binary_location = "/usr/bin/chromium"
driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
try:
    driver.get(url)
    wait = WebDriverWait(driver, 60)
    # the page asked /v1/models for the model's name
    wait.until(lambda d: d.find_element(By.ID, "model").text not in ("", "loading…"))
    assert not driver.find_element(By.ID, "model").text.startswith("no model"), \
        driver.find_element(By.ID, "model").text
    driver.find_element(By.ID, "max-tokens").clear()
    driver.find_element(By.ID, "max-tokens").send_keys("40")
    box = driver.find_element(By.ID, "input")
    box.send_keys("Hello! Who are you?")
    driver.find_element(By.ID, "send").click()
    # the reply grows while it streams: seen with some text before it is done
    seen_partial = False
    deadline = time.time() + 60
    while time.time() < deadline:
        replies = driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")
        if replies:
            r = replies[-1]
            if r.get_attribute("data-done") == "1":
                break
            if r.text:
                seen_partial = True
        time.sleep(0.005)
    reply = driver.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1]
    assert reply.get_attribute("data-done") == "1", "the reply did not finish"
    errors = driver.find_elements(By.CSS_SELECTOR, ".msg.error")
    assert not errors, errors[0].text
    assert reply.text.strip(), "the reply is empty"
    user = driver.find_elements(By.CSS_SELECTOR, ".msg.user")
    assert [u.text for u in user] == ["Hello! Who are you?"]
    driver.save_screenshot(shot)
    print(f"chat page: reply of {len(reply.text)} characters "
          f"({'seen while streaming' if seen_partial else 'finished before the first poll'}); "
          f"screenshot {shot}")
finally:
    driver.quit()
