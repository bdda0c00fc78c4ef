"""The multi-task model: the shared ``bert`` trunk and every member's head, one branch each.

Parameters: ``bert/...`` (the trunk every member's model builds, `bert_jax.tasks.trunk`) and
``<name>/<head>/...`` per member (its model's head, e.g. ``mrpc/classifier/kernel``), so a
member's single-task parameters are ``{"bert": params["bert"], **params[name]}``.

A batch holds one member's rows, so the forward pass is `jax.lax.switch` on the batch's
``task_id``: branch i runs member i's own model (the single-task model of its type, unchanged)
on the rows cut to that member's sequence length, and gives zeros of the other members'
output shapes. One jitted program serves every member (one compile, the train step stays one
pure function); at run time only the batch's member's branch executes, so each step costs one
trunk pass and its gradients reach only the trunk and that member's head.
"""

import dataclasses

import jax
import jax.numpy as jnp

from bert_jax.tasks import trunk
from bert_jax.tasks.multitask.data import member_key


@dataclasses.dataclass(frozen=True)
class MultitaskModel:
  """Has the ``init`` / ``apply`` of a linen module, as the trainer calls them.

  Attributes:
    names: member names, in order (``task_id`` indexes them).
    models: each member's single-task model (a linen module with a ``bert`` trunk).
    lengths: each member's sequence length (its rows are cut to it).
  """

  names: tuple
  models: tuple
  lengths: tuple

  def _inputs(self, index, inputs):
    return tuple(x[:, : self.lengths[index]] for x in inputs)

  def _run(self, index, params, inputs, rngs):
    member_params = {trunk.NAME: params[trunk.NAME], **params[self.names[index]]}
    return self.models[index].apply(
      {"params": member_params}, *self._inputs(index, inputs), rngs=rngs
    )

  def init(self, rngs, input_ids_BL, token_type_ids_BL, input_mask_BL, task_id_B):
    """{"params": {"bert": trunk, <name>: that member's head params, ...}}.

    Every member's model initialises its trunk from the same ``params`` rng under the same
    name, so the trunks agree; the first one is kept.
    """
    del task_id_B
    inputs = (input_ids_BL, token_type_ids_BL, input_mask_BL)
    params = {}
    for index, (name, model) in enumerate(zip(self.names, self.models)):
      member = dict(model.init(rngs, *self._inputs(index, inputs))["params"])
      params.setdefault(trunk.NAME, member.pop(trunk.NAME))
      params[name] = member
    return {"params": params}

  def apply(self, variables, input_ids_BL, token_type_ids_BL, input_mask_BL, task_id_B, rngs=None):
    """{``<name>/<output>``: array} of every member; the batch's member's are real.

    Args:
      variables: {"params": params as `init` makes them}.
      input_ids_BL, token_type_ids_BL, input_mask_BL: the shared encoder inputs.
      task_id_B: the batch's member index (every row the same; row 0 is read).
      rngs: the dropout / hashing rngs, passed to the member's model as they are.
    """
    params = variables["params"]
    inputs = (input_ids_BL, token_type_ids_BL, input_mask_BL)
    shapes = [
      jax.eval_shape(lambda i=i: self._run(i, params, inputs, rngs)) for i in range(len(self.names))
    ]

    def branch(index):
      def run():
        outputs = self._run(index, params, inputs, rngs)
        return {
          member_key(name, key): outputs[key] if j == index else jnp.zeros(shape.shape, shape.dtype)
          for j, name in enumerate(self.names)
          for key, shape in shapes[j].items()
        }

      return run

    if len(self.names) == 1:
      return branch(0)()
    return jax.lax.switch(task_id_B[0], [branch(i) for i in range(len(self.names))])
