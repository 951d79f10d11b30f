"""Quantization backends behind one predictor interface: the formats the methods declare (:mod:`.formats`), PyTorch,
ONNX Runtime and OpenVINO backends, fake quantization for training in the loop, bits chosen per matrix, sizes counted
from a shape, and the artefact each writes. Kept empty, so importing one backend loads no other."""
