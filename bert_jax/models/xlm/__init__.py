"""XLM (Lample & Conneau 2019), the cross-lingual LM: everything of ``model.family='xlm'``.

``options``: its config section (``model.xlm``); ``model``: the encoder and the LM
(``XLMModel`` / ``XLMWithLMHeadModel`` of transformers); ``hf``: Hugging Face interop both
ways. Its objectives (MLM, CLM, TLM) are `bert_jax.tasks.xlm_pretraining`, its data the pairs
TSV of `bert_jax.data.parallel_pairs`.
"""
