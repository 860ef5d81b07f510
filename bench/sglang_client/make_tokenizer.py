"""A small byte-level BPE tokenizer trained on the standard library's sources, for SGLang's bench client.

``python make_tokenizer.py OUT_DIR`` (about 2 s): writes tokenizer.json, tokenizer_config.json and a chat
template, so ``--tokenizer OUT_DIR --model OUT_DIR`` never reaches for a hub (see
../shared/reference/sglang-bench-client.md §1). Runs in .venv-sglang-bench.
"""

import glob
import os
import sys
import sysconfig

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

files = sorted(glob.glob(os.path.join(sysconfig.get_paths()["stdlib"], "*.py")))[:200]
tok = Tokenizer(models.BPE(unk_token=None))
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train(files, trainers.BpeTrainer(vocab_size=4096, special_tokens=["<s>", "</s>", "<pad>"],
                                     initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant:"
fast.save_pretrained(sys.argv[1])
