"""The images cloudrunner builds without a registry (`cloudrunner images`).

build (the debootstrap base, the hook runtime and the egress proxy: their names, labels,
recipes and build keys), artefacts (the runtime's pinned registry artefacts, fetched on
the host and verified), worker_build (the worker's image, from an installation),
project_image (a repository's .cursor/environment.json and the image it asks for). The
recipes themselves are the checkout's images/ folder, or `cloudrunner/_images/` in a wheel.
"""

from cloudrunner.images.artefacts import Artefact, ArtefactError, parse_manifest
from cloudrunner.images.build import (
    BASE_IMAGE,
    BUILD_KEY_LABEL,
    DEFAULT_RUNTIME_IMAGE,
    EGRESS_PROXY_REPOSITORY,
    RECIPES,
    RUNTIME_REPOSITORY,
    WORKER_REPOSITORY,
    BuildStep,
    ImageBuildError,
    Recipe,
    build_all,
    context_key,
    images_dir,
    recipe_dir,
    recipes,
    version_labels,
)
from cloudrunner.images.project_image import (
    ENVIRONMENT_FILE,
    BuildInputs,
    EnvironmentBuildError,
    EnvironmentFileError,
    EnvironmentImage,
    ProjectEnvironment,
    build_image,
    context_archive,
    context_files,
    image_tag,
    load_environment,
    resolve_build,
)
from cloudrunner.images.worker_build import build_worker

__all__ = [
    "BASE_IMAGE",
    "BUILD_KEY_LABEL",
    "DEFAULT_RUNTIME_IMAGE",
    "EGRESS_PROXY_REPOSITORY",
    "ENVIRONMENT_FILE",
    "RECIPES",
    "RUNTIME_REPOSITORY",
    "WORKER_REPOSITORY",
    "Artefact",
    "ArtefactError",
    "BuildInputs",
    "BuildStep",
    "EnvironmentBuildError",
    "EnvironmentFileError",
    "EnvironmentImage",
    "ImageBuildError",
    "ProjectEnvironment",
    "Recipe",
    "build_all",
    "build_image",
    "build_worker",
    "context_archive",
    "context_files",
    "context_key",
    "image_tag",
    "images_dir",
    "load_environment",
    "parse_manifest",
    "recipe_dir",
    "recipes",
    "resolve_build",
    "version_labels",
]
