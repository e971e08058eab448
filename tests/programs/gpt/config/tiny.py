# A tiny GPT on the byte-level Markov corpus of prepare.py, a few seconds on a CPU.
n_layer = 2
n_head = 2
n_embd = 32
block_size = 32
batch_size = 4
max_iters = 40
lr_decay_iters = 40
eval_interval = 10
eval_iters = 4
learning_rate = 3e-3
min_lr = 2e-4
warmup_iters = 4
