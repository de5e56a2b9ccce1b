"""What the client, the master (``am/``) and the task runtime share.

Each fact the three programs must agree on is written once, here, beside the
gRPC contract in ``proto/`` (generated code in ``tfyarn._proto``):

- :mod:`~tfyarn.contract.env`: the environment variables that carry a task's identity;
- :mod:`~tfyarn.contract.status`: the published job status, its phases, task
  states and key-value store keys;
- :mod:`~tfyarn.contract.record`: where the master keeps a job's final status
  on HDFS for ``tfyarn status`` after the job ended;
- :mod:`~tfyarn.contract.heartbeat`: heartbeat interval and timeout;
- :mod:`~tfyarn.contract.notice`: stop notices: the restart code (42), the
  file and variables a script's ``tfyarn.should_stop()`` reads;
- :mod:`~tfyarn.contract.clusterspec`: the ClusterSpec's wire layout;
- :mod:`~tfyarn.contract.channel`: the mutual-TLS channel to the master, where
  gRPC errors become tfyarn exceptions;
- :mod:`~tfyarn.contract.noise`: which stderr lines are TensorFlow's start-up
  chatter (kept out of diagnostics and of ``tfyarn data`` output).
- :mod:`~tfyarn.contract.jvm`: the options of the job's JVMs (skein's
  ApplicationMaster and the master's Java helpers);
- :mod:`~tfyarn.contract.skein_import`: skein imported without setuptools'
  distutils (the master and the runtime);
- :mod:`~tfyarn.contract.hadoop_conf`: the Hadoop configuration directory and
  what its site files say (``fs.defaultFS``, name services, ResourceManagers,
  Kerberos);
- :mod:`~tfyarn.contract.local_cluster`: where ``tfyarn cluster start``'s cluster
  lives and whether its daemons run (the cluster package and the configuration
  reader both ask it);
- :mod:`~tfyarn.contract.ticket`: whether this process holds a Kerberos ticket;
- :mod:`~tfyarn.contract.hdfs_plugin`: what the ``hdfs://`` plugin was built
  for (the build hook, the client and the task runtime check it), and the
  line said where it is missing.

``am/`` imports only this package, ``tfyarn.spec``, ``tfyarn.errors`` and the
generated protos from ``tfyarn``.
"""
