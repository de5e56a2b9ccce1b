"""Names of the environment variables that carry a task's identity.

Set by ``JobSpec.to_skein`` (per service) and by the master's ``add_container``
(per container); read by ``tfyarn.runtime`` and by ``am``. User scripts see
TF_CONFIG and, for convenience, the TFYARN_* values below.
"""

JOB = "TFYARN_JOB"  # base64 JSON of the JobSpec
ROLE = "TFYARN_ROLE"  # chief | worker | ps | evaluator
TASK_INDEX = "TFYARN_TASK_INDEX"
ATTEMPT = "TFYARN_ATTEMPT"  # which launch of this task (0 first)
MASTER_ADDRESS = "TFYARN_MASTER_ADDRESS"  # host:port of the master's gRPC service
RESTART = "TFYARN_RESTART"  # how many times the whole cluster was restarted
PORT = "TFYARN_PORT"  # a port to reuse (a replaced task keeps its address when it can)
# Long jobs on a secure cluster (issue 12): with --principal/--keytab the keytab
# travels to the master alone, private to the application, under this name,
# and the principal in this variable (am/tokens.py).
KEYTAB_FILE = "tfyarn.keytab"
KEYTAB_PRINCIPAL = "TFYARN_KEYTAB_PRINCIPAL"
# The script's hdfs:// plugin for TensorFlow (a library path; tfyarn/hdfs.py).
HDFS_PLUGIN = "TFYARN_HDFS_PLUGIN"
