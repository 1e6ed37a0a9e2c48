Bsave_infer_model/scale_0.tmp_1J¯Š9©î?§ë>+s
?