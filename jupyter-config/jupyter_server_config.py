"""The JupyterLab that `make lab` serves (.ci/lab.py): Jupyter reads this folder
through JUPYTER_CONFIG_PATH; the reader's own Jupyter folders play no part.

Settings the reader sees (default viewers, no news pop-up, kernel start) are in
labconfig/default_setting_overrides.json: defaults that settings the reader changes
in this JupyterLab still override.
"""

import os
import sys
from pathlib import Path

from jupyter_server.services.contents.manager import ContentsManager
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
for name, value in parse_jupytext_configuration_file(str(REPOSITORY / "jupytext.toml")).items():
    setattr(c.JupytextConfiguration, name, value)

# Each lesson is listed once, as its .py; opening it shows the stored outputs of the
# .ipynb. Two tabs of one pair would overwrite each other's saves. The reader's own
# notebooks (not named NN-...) stay listed.
c.ContentsManager.hide_globs = [
    *ContentsManager.class_traits()["hide_globs"].default(),
    "[0-9][0-9]-*.ipynb",
]

# The layout of open tabs and the settings changed in JupyterLab are remembered in this
# environment, apart from the reader's other JupyterLab sessions (whose default workspace
# would otherwise reopen these files) and from the session's throwaway config folder.
c.LabApp.workspaces_dir = os.environ.get(
    "JUPYTERLAB_WORKSPACES_DIR", os.path.join(LAB_STATE, "workspaces")
)
c.LabApp.user_settings_dir = os.environ.get(
    "JUPYTERLAB_SETTINGS_DIR", os.path.join(LAB_STATE, "user-settings")
)
