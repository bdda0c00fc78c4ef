"""Multi-task fine-tuning (MT-DNN style): one shared encoder, one head per listed task.

config (the ``data`` section: tasks with their type, weight and data keys; sampling) ->
members (the task types a member may be, and their data / objective entry points) ->
sampling (which task each train step draws, a pure function of the seed and the step) ->
data (members' features as one batch schema; eval metrics keyed ``<task>/<metric>``) ->
model (the shared ``bert`` trunk with every member's head, one branch per member) ->
objective (each member's own loss and sums, on its rows). `bert_jax.tools.export_task`
writes one member as a single-task workdir.
"""
