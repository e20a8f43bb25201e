from glob import glob

from setuptools import find_packages, setup

PACKAGE = "gp_mapper"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(include=[PACKAGE, f"{PACKAGE}.*"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.py")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml") + glob("config/*.rviz")),
    ],
    install_requires=["setuptools", "numpy", "scipy", "torch", "rosbags", "matplotlib"],
    zip_safe=True,
    maintainer="gp_mapper maintainers",
    maintainer_email="maintainers@gp-mapper.dev",
    description="Continual magnetic-field mapping with an online sparse Gaussian process.",
    license="Apache-2.0",
    extras_require={"test": ["pytest<9"], "bench": ["gpytorch"]},
    tests_require=["pytest"],
    entry_points={
        "console_scripts": [
            "gp_mapper_node = gp_mapper.ros.node:main",
            "gp_localizer_node = gp_mapper.ros.localizer_node:main",
            "gp-mapper = gp_mapper.cli:main",
        ],
    },
)
