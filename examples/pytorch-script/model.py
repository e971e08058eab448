"""The model of train.py: token embedding, stacked GRU layers and a linear head."""
import torch
import torch.nn.functional as F


class GruLm(torch.nn.Module):
    def __init__(self, vocab, width, layers, dropout):
        super().__init__()
        self.dropout = dropout
        self.embed = torch.nn.Embedding(vocab, width)
        self.gru = torch.nn.GRU(width, width, num_layers=layers, batch_first=True,
                                dropout=dropout if layers > 1 else 0.0)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, x):  # [B, L] token ids -> [B, L, vocab] logits
        h, _ = self.gru(F.dropout(self.embed(x), self.dropout, self.training))
        return self.head(F.dropout(h, self.dropout, self.training))
