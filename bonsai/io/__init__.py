"""Files in and out of bonsai: the model file format (``model_file``), export to
ONNX / Treelite (``export``), XGBoost / LightGBM models read in (``importers``, with
``import_xgboost``, ``import_lightgbm``, ``_import_common``), and the command line's
data tables (``tables``: CSV, TSV, Parquet, LibSVM).  Nothing is imported here:
each module loads on its own (export and the importers only when called).
"""
