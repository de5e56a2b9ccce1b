"""A keytab login travels to the master, so long jobs keep their HDFS tokens fresh.

With ``--principal``/``--keytab`` on a secure cluster the keytab goes with the
job as a file of the master alone (never a task's), with YARN's
``application`` visibility: uploaded to the job's staging directory (mode
0600 in a 0700 directory, skein's), localized for this application only,
deleted with it. The master logs in with it to fetch fresh HDFS delegation
tokens before the old ones end (``am/tokens.py``). Without a keytab nothing
travels; the master then warns how long the job can use HDFS.
"""

from __future__ import annotations

import os
from typing import Any

from tfyarn.client.kerberos import Login
from tfyarn.contract import env as _env
from tfyarn.contract.hadoop_conf import HadoopConf, explicit_conf_dir


def ship_keytab(app_spec: Any, login: Login) -> bool:
    """Add the login's keytab and principal to a ``skein.ApplicationSpec``'s master.

    Returns whether it did: a keytab login on a secure cluster only.
    """
    import skein

    conf_dir = explicit_conf_dir()
    if not (login.keytab and login.principal and conf_dir):
        return False
    if not HadoopConf(conf_dir).is_secure:
        return False
    master = app_spec.master
    master.files[_env.KEYTAB_FILE] = skein.File(
        source=os.path.abspath(login.keytab), visibility="application"
    )
    master.env[_env.KEYTAB_PRINCIPAL] = login.principal
    return True
