# Ported from Ray's doc/source/train/getting-started-pytorch-lightning.rst, the
# "PyTorch Lightning + Ray Train" quickstart (Apache-2.0, ray-project/ray): Ray's text with the
# imports swapped to tandem and the sizes shrunk for a 2-core machine.
# torchvision has no CPU build for torch 2.13 here, so resnet18 is replaced by a small CNN
# with the same interface, and the FashionMNIST download by generated 28x28 images.
import torch
from torch.utils.data import DataLoader
import lightning.pytorch as pl

from tandem.train.torch import TorchTrainer
from tandem.train import ScalingConfig
import tandem as ray
import tandem.train.lightning  # noqa: F401 - makes ray.train.lightning below resolve


class resnet18(torch.nn.Module):  # small stand-in for torchvision.models.resnet18
    def __init__(self, num_classes):
        super().__init__()
        self.conv1 = torch.nn.Conv2d(3, 64, kernel_size=7, stride=2, padding=3, bias=False)
        self.head = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(2),
                                        torch.nn.Flatten(), torch.nn.Linear(64 * 4, num_classes))

    def forward(self, x):
        return self.head(self.conv1(x))


def FashionMNIST(root, train, download, transform):  # generated stand-in, no download
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 1, 28, 28, generator=g)
    y = (x.mean(dim=(1, 2, 3)) * 40).long().clamp(-5, 4) + 5
    return torch.utils.data.TensorDataset(x, y)


# Model, Loss, Optimizer
class ImageClassifier(pl.LightningModule):
    def __init__(self):
        super(ImageClassifier, self).__init__()
        self.model = resnet18(num_classes=10)
        self.model.conv1 = torch.nn.Conv2d(1, 64, kernel_size=(7, 7), stride=(2, 2), padding=(3, 3), bias=False)
        self.criterion = torch.nn.CrossEntropyLoss()

    def forward(self, x):
        return self.model(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        outputs = self.forward(x)
        loss = self.criterion(outputs, y)
        self.log("loss", loss, on_step=True, prog_bar=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.Adam(self.model.parameters(), lr=0.001)


def train_func(config):

    # Data
    transform = None
    train_data = FashionMNIST(root='./data', train=True, download=True, transform=transform)
    train_dataloader = DataLoader(train_data, batch_size=16, shuffle=True)

    # Training
    model = ImageClassifier()
    # [1] Configure PyTorch Lightning Trainer.
    trainer = pl.Trainer(
        max_epochs=2,
        devices="auto",
        accelerator="auto",
        strategy=ray.train.lightning.RayDDPStrategy(),
        plugins=[ray.train.lightning.RayLightningEnvironment()],
        callbacks=[ray.train.lightning.RayTrainReportCallback()],
    )
    trainer = ray.train.lightning.prepare_trainer(trainer)
    trainer.fit(model, train_dataloaders=train_dataloader)

# [2] Configure scaling and resource requirements.
scaling_config = ScalingConfig(num_workers=2, use_gpu=False)

# [3] Launch distributed training job.
trainer = TorchTrainer(train_func, scaling_config=scaling_config)
result = trainer.fit()

result.metrics     # The metrics reported during training.
result.checkpoint  # The latest checkpoint reported during training.
result.path     # The path where logs are stored.
result.error       # The exception that was raised, if training failed.
print("metrics:", sorted(result.metrics), "epoch:", result.metrics["epoch"])
print("checkpoint files:", sorted(__import__("os").listdir(result.checkpoint.path)))
