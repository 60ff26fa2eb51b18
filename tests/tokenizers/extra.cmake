# The tokenizer tests run `cpdit tokenize`: building test_tokenizers builds it.
add_dependencies(test_tokenizers cpdit_app)
