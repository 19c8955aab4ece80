"""The JupyterLab that `make lab` serves (.ci/lab.py): Jupyter reads this folder
through JUPYTER_CONFIG_PATH; the reader's own Jupyter folders play no part.

Settings the reader sees (default viewers, no news pop-up, kernel start) are in
labconfig/default_setting_overrides.json: defaults that settings the reader changes
in this JupyterLab still override.
"""

import os
import re
import sys
from pathlib import Path

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
from jupytext.config import parse_jupytext_configuration_file

REPOSITORY = Path(__file__).resolve().parent.parent
LAB_STATE = os.path.join(sys.prefix, "share", "jupyter", "lab")

c = get_config()  # noqa: F821 (defined by Jupyter when it runs this file)

# .ci/lab.py hands the token over in JUPYTER_TOKEN, never on a command line (where `ps`
# shows it). Taken out of the environment here, it is not inherited by kernels and
# terminals, whose code has no use for it.
if token := os.environ.pop("JUPYTER_TOKEN", None):
    c.IdentityProvider.token = token

# Jupytext looks for jupytext.toml only inside the server's root (notebooks/), so the
# repository's file is handed to it here: the same pairing and metadata filters as
# `make sync`, so saving in JupyterLab writes both files of a pair and a clean .py.
for name, value in parse_jupytext_configuration_file(str(REPOSITORY / "notebooks" / "jupytext.toml")).items():
    setattr(c.JupytextConfiguration, name, value)

# Each lesson is listed once, as its .py; opening it shows the stored outputs of the
# .ipynb. Two tabs of one pair would overwrite each other's saves. Only the .ipynb of a
# pair is left out: the reader's own notebooks and the GPU runs in notebooks/gpu/ (an
# NN-name.ipynb with no .py beside it) stay listed. hide_globs cannot say "beside a
# .py" (it sees a name alone), so folder listings are filtered here; Jupytext's server
# extension builds its contents manager on top of this one.
PAIRED = re.compile(r"[0-9][0-9]-.*\.ipynb")


def lessons_listed_once(model: dict) -> dict:
    """A folder's model without the .ipynb files that have a .py of the same name beside them."""
    if model.get("type") == "directory" and isinstance(model.get("content"), list):
        names = {entry["name"] for entry in model["content"]}
        model["content"] = [
            entry
            for entry in model["content"]
            if not (
                PAIRED.fullmatch(entry["name"]) and entry["name"][: -len(".ipynb")] + ".py" in names
            )
        ]
    return model


class LessonsListedOnce(AsyncLargeFileManager):
    """The server's default contents manager, listing each lesson pair once."""

    async def _dir_model(self, path, content=True):
        return lessons_listed_once(await super()._dir_model(path, content=content))


c.ServerApp.contents_manager_class = LessonsListedOnce

# The layout of open tabs and the settings changed in JupyterLab are remembered in this
# environment, apart from the reader's other JupyterLab sessions (whose default workspace
# would otherwise reopen these files) and from the session's throwaway config folder.
c.LabApp.workspaces_dir = os.environ.get(
    "JUPYTERLAB_WORKSPACES_DIR", os.path.join(LAB_STATE, "workspaces")
)
c.LabApp.user_settings_dir = os.environ.get(
    "JUPYTERLAB_SETTINGS_DIR", os.path.join(LAB_STATE, "user-settings")
)
