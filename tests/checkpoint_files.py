"""A wyjax workdir holding only params, as a test's starting point (a converted or randomly
initialised model): the layout of wyjax.core.checkpoints, written the way the loops write it."""

import orbax.checkpoint as ocp
from etils import epath

from wyjax.core import checkpoints


def save_params(workdir, step: int, params, config, tokenizer=None) -> None:
  checkpoints.write_model_info(workdir, config.to_dict(), [h for h in params if h != "encoder"], tokenizer)
  with checkpoints.manager(workdir) as mngr:
    mngr.save(step, args=ocp.args.Composite(state=ocp.args.PyTreeSave({"params": params})))
    mngr.wait_until_finished()
    checkpoints.seal(epath.Path(mngr.directory) / str(step))
