"""Several runs of one configuration trained as one batched model in one process.

model.py  the members' parameters stacked, one vmapped forward over them
loop.py   one optimizer step for all members, each member's own solo bookkeeping
jobs.py   a group of sweep jobs to their run dirs, as each job's solo run would leave it
logs.py   each member's lines in its own train.log

The sweep's launcher (`hydra/launcher=stacked`, hydra_plugins/seqforecast_launcher) groups the
jobs it is given.
"""
