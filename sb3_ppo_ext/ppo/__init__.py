"""The PPO algorithm (``sb3_ppo_ext.PPO``, defined in :mod:`sb3_ppo_ext.ppo.ppo`) and its update's modules: one per role
and one per speed trick, each saying what it mirrors.

The path of one iteration of ``learn()``, with the module holding each step (speed tricks marked *speed*):

1. Collect: ``PPO.collect_rollouts`` steps the env through a ``CollectionGuard`` (``non_finite.py``: a NaN or an
   infinity stops it) and acts with the numpy copy of the policy (*speed*: ``numpy_policy.py``, in SB3's loop as
   ``collection.py`` writes it, the buffer filled by ``rollout.py``'s ``add_to_rollout_buffer``), else with SB3's loop.
2. Rollout: ``PPO.train`` sets the update's torch threads (*speed*: ``threads.py``); ``UpdateRollout``
   (*speed*: ``rollout.py``) reads the buffer once as tensors, with the collecting policy's distribution on every row,
   and cuts each epoch's minibatches from them in SB3's order.
3. Loss: ``PPOLoss`` (``loss.py``), one line per term as SB3's ``train()``, called through ``UpdateLoss`` (compiled
   with ``compile_update``: ``compiled.py``); its ``ActionEvaluator`` (``evaluation.py``) gives values,
   log-probabilities and entropy (*speed*: ``direct_evaluation.py``) and the KL (``kl.py``, ``distributions.py``).
4. Optimiser groups: ``OptimizerGroups`` (``optimizer_groups.py``) sets the rates of SB3's one group, or of the actor's
   and the critic's (``actor_critic_groups.py``), and takes each minibatch's clipped step (*speed*: ``optim.py``,
   fused Adam and ``ClippedStep``).
5. Adaptive rules (``adaptive.py``): ``KLAdaptiveLearningRate`` sets the learning rate from the KL after every
   minibatch or epoch; after the update, ``KLPenaltyController`` sets beta from the KL over the whole rollout. Then
   ``PPO._record_update`` logs means over the update, and ``std_schedule.py`` sets the next rollout's action std.

Around the path: ``settings.py`` checks every setting when the model is built (``PPO._setup_model`` then builds the
adaptive rules), and ``saved_state.py`` saves the rules' state as plain numbers and a separate critic's optimizer
state in SB3's one-group form.
"""

from sb3_ppo_ext.ppo.ppo import PPO

__all__ = ["PPO"]
