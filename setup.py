"""Packaging for both packages; every value comes from settings.ini (the nbdev convention)."""
from configparser import ConfigParser
from pathlib import Path

import setuptools

HERE = Path(__file__).resolve().parent
config = ConfigParser(delimiters=["="])
config.read(HERE / "settings.ini", encoding="utf-8")
cfg = config["DEFAULT"]

for key in ("version", "description", "lib_name", "author", "author_email", "license", "min_python"):
    if not cfg.get(key):
        raise SystemExit(f"settings.ini: missing required key {key!r}")

requirements = cfg.get("requirements", "").split()
suvi_fill_requirements = cfg.get("suvi_fill_requirements", "").split()
sunpy_requirements = cfg.get("sunpy_requirements", "").split()
cluster_requirements = cfg.get("cluster_requirements", "").split()
docs_requirements = cfg.get("docs_requirements", "").split()
dev_requirements = cfg.get("dev_requirements", "").split()
console_scripts = cfg.get("console_scripts", "").split()
readme = HERE / "README.md"
# settings.ini names the license as nbdev does; packaging metadata wants its SPDX name.
LICENSES = {"apache2": "Apache-2.0"}
docs_url = cfg.get("doc_host", "").rstrip("/") + cfg.get("doc_baseurl", "")

setuptools.setup(
    name=cfg["lib_name"],
    version=cfg["version"],
    description=cfg["description"],
    long_description=readme.read_text(encoding="utf-8") if readme.exists() else "",
    long_description_content_type="text/markdown",
    author=cfg["author"],
    author_email=cfg["author_email"],
    license=LICENSES.get(cfg["license"], cfg["license"]),
    license_files=["LICENSE"],
    keywords=cfg.get("keywords", ""),
    url=cfg.get("git_url"),
    project_urls={"Documentation": docs_url, "Source": cfg.get("git_url"),
                  "Changelog": f"{cfg.get('git_url')}/blob/{cfg.get('branch', 'main')}/CHANGELOG.md"},
    python_requires=f">={cfg['min_python']}",
    packages=setuptools.find_packages(include=["suvi_fill", "suvi_fill.*", "szrank", "szrank.*"]),
    include_package_data=True,
    package_data={"szrank": ["data/*", "records/*"], "suvi_fill": ["resources/*", "resources/pretrained/*"]},
    install_requires=requirements,
    extras_require={
        "suvi-fill": suvi_fill_requirements,               # szrank needs only `requirements`; the name as
                                                          # metadata normalises it (PEP 685), so pip 23.2 finds it
        "sunpy": suvi_fill_requirements + sunpy_requirements,
        "cluster": cluster_requirements,                   # Dask for --scheduler (szrank search)
        "docs": docs_requirements,
        "dev": suvi_fill_requirements + docs_requirements + dev_requirements,  # both packages, notebooks, site and tests
    },
    entry_points={"console_scripts": console_scripts},
    zip_safe=False,
)
