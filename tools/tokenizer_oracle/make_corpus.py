#!/usr/bin/env python3
"""Writes tests/data/tokenizer/corpus.jsonl: the strings the tokenizer oracle test compares.

One JSON string per line. Covers prose in many scripts, code, whitespace, digits, emoji,
combining marks, special-token text and edge cases. Characters are kept to Unicode 14 so that
PCRE2's and the oracle's Unicode property tables agree. Re-run after editing:
    python3 tools/tokenizer_oracle/make_corpus.py
"""
import json
import pathlib

prose = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "It's a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.",
    "I'm sure you'll agree: we've done what we'd planned, haven't we? They're here; she's gone.",
    "DON'T SHOUT! I'M LISTENING. WE'VE HEARD. YOU'LL SEE. IT'S FINE. THEY'RE OK. HE'D GO.",
    "Mixed Case: It'S, We'Ve, You'Ll, They'Re, I'M, He'D, Isn'T.",
    "Quotes: \"double\", 'single', `back`, \u201ccurly\u201d, \u2018curly\u2019, \u00abguillemets\u00bb.",
    "Ellipsis... and more\u2026 dashes \u2014 en \u2013 hyphen-ated words.",
    "Mr. Smith went to Washington, D.C., on Jan. 5th at 3:30 p.m.",
    "Email me at jane.doe+tag@example.co.uk or visit https://example.com/path?q=1&r=two#frag",
    "Hashtags #AI #MachineLearning and mentions @user_name!",
    "Prices: $19.99, \u20ac5,00, \u00a3100, \u00a53000, \u20b9250, 50% off!!!",
    "Temperature: -40\u00b0C = -40\u00b0F; H\u2082O, x\u00b2 + y\u00b3 = z\u00b9, \u00bd + \u00bc = \u00be",
    "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.",
    "Il \u00e9tait une fois, dans un pays lointain, une princesse qui s'appelait \u00c9lodie. \u00c7a va? Tr\u00e8s bien, merci!",
    "Der Stra\u00dfenverkehr in M\u00fcnchen ist \u00fcberm\u00e4\u00dfig. Gr\u00fc\u00df Gott! Fu\u00dfg\u00e4nger\u00fcberweg.",
    "El ni\u00f1o comi\u00f3 pi\u00f1a y ac\u00e9rrimo caf\u00e9. \u00bfD\u00f3nde est\u00e1? \u00a1Ol\u00e9!",
    "A programa\u00e7\u00e3o \u00e9 divertida. N\u00e3o \u00e9? S\u00e3o Paulo, cora\u00e7\u00e3o.",
    "Za\u017c\u00f3\u0142\u0107 g\u0119\u015bl\u0105 ja\u017a\u0144. \u0141\u00f3d\u017a, Gda\u0144sk, Wroc\u0142aw.",
    "\u0130stanbul'da \u00e7ay i\u00e7tik; \u015fehir \u00e7ok g\u00fczeldi. I\u011fd\u0131r, \u0131\u015f\u0131k.",
    "Ti\u1ebfng Vi\u1ec7t c\u00f3 d\u1ea5u: Xin ch\u00e0o, t\u00f4i t\u00ean l\u00e0 Nguy\u1ec5n. C\u1ea3m \u01a1n!",
    "\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440! \u041a\u0430\u043a \u0434\u0435\u043b\u0430? \u042d\u0442\u043e \u0442\u0435\u0441\u0442 \u0442\u043e\u043a\u0435\u043d\u0438\u0437\u0430\u0442\u043e\u0440\u0430.",
    "\u0421\u044a\u0435\u0448\u044c \u0436\u0435 \u0435\u0449\u0451 \u044d\u0442\u0438\u0445 \u043c\u044f\u0433\u043a\u0438\u0445 \u0444\u0440\u0430\u043d\u0446\u0443\u0437\u0441\u043a\u0438\u0445 \u0431\u0443\u043b\u043e\u043a, \u0434\u0430 \u0432\u044b\u043f\u0435\u0439 \u0447\u0430\u044e.",
    "\u0423\u043a\u0440\u0430\u0457\u043d\u0441\u044c\u043a\u0430 \u043c\u043e\u0432\u0430: \u0491\u0430\u043d\u043e\u043a, \u0457\u0436\u0430\u043a, \u0454\u0434\u043d\u0456\u0441\u0442\u044c.",
    "\u0393\u03b5\u03b9\u03ac \u03c3\u03bf\u03c5 \u039a\u03cc\u03c3\u03bc\u03b5! \u0397 \u03b3\u03bb\u03ce\u03c3\u03c3\u03b1 \u03bc\u03bf\u03c5 \u03b5\u03af\u03bd\u03b1\u03b9 \u03b5\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ae. \u039f\u0394\u03a5\u03a3\u03a3\u0395\u03a5\u03a3.",
    "\u0645\u0631\u062d\u0628\u0627 \u0628\u0627\u0644\u0639\u0627\u0644\u0645! \u0647\u0630\u0627 \u0627\u062e\u062a\u0628\u0627\u0631 \u0644\u0644\u063a\u0629 \u0627\u0644\u0639\u0631\u0628\u064a\u0629.",
    "\u0627\u0644\u0652\u0639\u064e\u0631\u064e\u0628\u0650\u064a\u0651\u064e\u0629\u064f \u0645\u064e\u0639\u064e \u0627\u0644\u062a\u0651\u064e\u0634\u0652\u0643\u0650\u064a\u0644\u0650",
    "\u05e9\u05dc\u05d5\u05dd \u05e2\u05d5\u05dc\u05dd! \u05d6\u05d4\u05d5 \u05de\u05d1\u05d7\u05df \u05e9\u05dc \u05e2\u05d1\u05e8\u05d9\u05ea.",
    "\u0633\u0644\u0627\u0645 \u062f\u0646\u06cc\u0627! \u0645\u0646 \u0641\u0627\u0631\u0633\u06cc \u0635\u062d\u0628\u062a \u0645\u06cc\u200c\u06a9\u0646\u0645.",
    "\u0928\u092e\u0938\u094d\u0924\u0947 \u0926\u0941\u0928\u093f\u092f\u093e! \u092f\u0939 \u0939\u093f\u0928\u094d\u0926\u0940 \u092e\u0947\u0902 \u090f\u0915 \u092a\u0930\u0940\u0915\u094d\u0937\u0923 \u0939\u0948\u0964",
    "\u0915\u094d\u0937\u0924\u094d\u0930\u093f\u092f \u0936\u094d\u0930\u0940 \u0926\u094d\u0935\u093e\u0930 \u0939\u093f\u0928\u094d\u0926\u0942 \u0930\u093e\u0937\u094d\u091f\u094d\u0930",
    "\u0986\u09ae\u09bf \u09ac\u09be\u0982\u09b2\u09be\u09af\u09bc \u0997\u09be\u09a8 \u0997\u09be\u0987\u0964",
    "\u0bb5\u0ba3\u0b95\u0bcd\u0b95\u0bae\u0bcd \u0b89\u0bb2\u0b95\u0bae\u0bcd! \u0ba4\u0bae\u0bbf\u0bb4\u0bcd \u0bae\u0bca\u0bb4\u0bbf.",
    "\u0e2a\u0e27\u0e31\u0e2a\u0e14\u0e35\u0e0a\u0e32\u0e27\u0e42\u0e25\u0e01 \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\u0e44\u0e21\u0e48\u0e21\u0e35\u0e0a\u0e48\u0e2d\u0e07\u0e27\u0e48\u0e32\u0e07\u0e23\u0e30\u0e2b\u0e27\u0e48\u0e32\u0e07\u0e04\u0e33",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u8fd9\u662f\u4e00\u4e2a\u5206\u8bcd\u5668\u7684\u6d4b\u8bd5\u3002\u6211\u4eec\u559c\u6b22\u81ea\u7136\u8bed\u8a00\u5904\u7406\u3002",
    "\u7e41\u9ad4\u4e2d\u6587\uff1a\u6211\u611b\u81fa\u7063\u7684\u9e97\u8c46\u8150\u3002\u9f8d\u9a30\u864e\u8e8d\u3002",
    "\u3053\u3093\u306b\u3061\u306f\u4e16\u754c\uff01\u79c1\u306f\u65e5\u672c\u8a9e\u3092\u52c9\u5f37\u3057\u3066\u3044\u307e\u3059\u3002\u30ab\u30bf\u30ab\u30ca\u3082\u3002",
    "\uff8a\uff9d\uff76\uff78\uff76\uff80\uff76\uff85 \u534a\u89d2\u30ab\u30ca \u3068 \uff26\uff55\uff4c\uff4c\uff57\uff49\uff44\uff54\uff48",
    "\uc548\ub155\ud558\uc138\uc694, \uc138\uacc4! \ud55c\uad6d\uc5b4 \ud1a0\ud06c\ub098\uc774\uc800 \ud14c\uc2a4\ud2b8\uc785\ub2c8\ub2e4.",
    "\u10d2\u10d0\u10db\u10d0\u10e0\u10ef\u10dd\u10d1\u10d0 \u10db\u10e1\u10dd\u10e4\u10da\u10d8\u10dd! \u0532\u0561\u0580\u0587 \u0561\u0577\u056d\u0561\u0580\u0570!",
    "\u1230\u120b\u121d \u12d3\u1208\u121d! \u12a0\u121b\u122d\u129b \u124b\u1295\u124b\u0964",
    "Mixing scripts: abc\u0430\u0431\u0432\u03b1\u03b2\u03b3\u4e2d\u6587\ud55c\uae00123",
    "\u1780\u1798\u17d2\u1796\u17bb\u1787\u17b6 \u0ea5\u0eb2\u0ea7 \u1019\u103c\u1014\u103a\u1019\u102c",
]

code = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "import numpy as np\nx = np.arange(10)\nprint(x[::2], x.sum())\n",
    "class Foo:\n\tdef __init__(self):\n\t\tself.x = {'a': [1, 2, 3]}\n",
    "#include <iostream>\n\nint main() {\n  std::cout << \"Hello, world!\" << std::endl;\n  return 0;\n}\n",
    "template <typename T>\nstd::vector<T> f(const std::vector<T>& v) { return {v.rbegin(), v.rend()}; }",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(1, 2)}`);\n",
    "fn main() {\n    let v: Vec<i32> = (0..10).filter(|x| x % 2 == 0).collect();\n    println!(\"{:?}\", v);\n}\n",
    "package main\n\nimport \"fmt\"\n\nfunc main() {\n\tfmt.Println(\"hi\")\n}\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE 'A%' ORDER BY id DESC;",
    "<!DOCTYPE html>\n<html><head><title>Test</title></head><body><p class=\"x\">Hi &amp; bye</p></body></html>",
    "{\"key\": \"value\", \"list\": [1, 2.5, true, null], \"nested\": {\"a\": \"\\u00e9\"}}",
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\" | wc -c; done\n",
    "server:\n  port: 8080\n  hosts:\n    - a.example.com\n    - b.example.com\n",
    "all: build\n\nbuild:\n\tg++ -O2 -Wall main.cpp -o main\n",
    "if (x != nullptr && *x >= 0x7FFF) { y <<= 2; z ^= ~w; }",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f**=6;g//=7;h&&=i||j??k",
    "// comment\n/* block\n   comment */\nint x = 42; // trailing",
    "```python\nprint('hello')\n```",
    "    indented with four spaces\n        and eight\n\t\tand tabs\n",
    "lambda x: x**2 if x>0 else -x",
    "$ git commit -m \"fix: handle edge-case (#123)\" && git push origin main",
    "C:\\Users\\Admin\\Documents\\file.txt and /usr/local/bin/env python3",
    "\\begin{equation} E = mc^2 \\end{equation} $\\sum_{i=0}^{n} i = \\frac{n(n+1)}{2}$",
    "matrix = [[1,0,0],[0,1,0],[0,0,1]]",
    "x = 0b1010 | 0o777 | 0xDEADBEEF | 1_000_000 | 3.14e-10",
    "<?php echo \"Hello\"; ?>",
    "SELECT * FROM t;\r\nUPDATE t SET a=1;\r\n",
    "public static void main(String[] args) { System.out.println(\"Java\"); }",
    "let regex = /^[a-z0-9._%+-]+@[a-z0-9.-]+\\.[a-z]{2,}$/i;",
]

whitespace = [
    "", " ", "  ", "   ", "    ", "          ", "\t", "\t\t", "\n", "\n\n", "\n\n\n\n", "\r\n", "\r", " \n ",
    " \t \n ", "a  b", "a   b", "a\tb", "a\nb", "a\r\nb", " leading space", "  two leading", "trailing space ",
    "trailing two  ", "  both  ", "line1\nline2\n\nline4", "word\n\n\n\nword", "tab\tseparated\tvalues\t",
    "nbsp\u00a0here", "ideographic\u3000space", "em\u2003space", "thin\u2009space", "zero\u200bwidth",
    "bom\ufeffinside", "\ufeffbom at start", "line\u2028separator", "para\u2029separator", "nel\u0085next",
    "vertical\u000btab\u000cform", "   \n   \n   ", "\n \n \n", "end with newline\n", "a \n\n b", "spaces    then\ttabs\t\t\tthen\nnewlines",
    "x" + " " * 40 + "y", "\t" * 12 + "deep", " \u00a0 \u00a0 ",
]

digits = [
    "0", "7", "42", "123", "1234", "12345", "123456", "1234567890", "3.14159265358979323846",
    "1,000,000.00", "2024-01-15T12:34:56Z", "+1 (555) 123-4567", "192.168.0.1:8080",
    "9" * 64, "1234567890" * 8, "0.000000001", "1e100", "-273.15",
    "\u0661\u0662\u0663\u0664\u0665", "\u0967\u0968\u0969\u096a", "\uff11\uff12\uff13\uff14\uff15",
    "\u2460\u2461\u2462 \u2160\u2161\u2162", "a1b2c3d4", "v1.2.3-rc.4+build.5", "x86_64", "2^32 = 4294967296",
]

emoji = [
    "\U0001F600", "\U0001F600\U0001F603\U0001F604\U0001F601", "I \u2764\ufe0f NY", "\U0001F44D\U0001F3FD",
    "\U0001F44B\U0001F3FB\U0001F44B\U0001F3FC\U0001F44B\U0001F3FD\U0001F44B\U0001F3FE\U0001F44B\U0001F3FF",
    "\U0001F468\u200d\U0001F469\u200d\U0001F467\u200d\U0001F466 family",
    "\U0001F3F3\ufe0f\u200d\U0001F308 rainbow flag", "\U0001F1FA\U0001F1F8\U0001F1EF\U0001F1F5\U0001F1E9\U0001F1EA",
    "1\ufe0f\u20e3 2\ufe0f\u20e3 #\ufe0f\u20e3", "\U0001F9D1\u200d\U0001F4BB coding", "\U0001F469\U0001F3FD\u200d\U0001F680",
    "\U0001FAE0 melting", "\U0001F525\U0001F525\U0001F525 fire", "emoji\U0001F680in\U0001F30Dwords",
    "\u263a\u2603\u2764\u2728\u2705\u274c", "\U0001F3F4\U000E0067\U000E0062\U000E0073\U000E0063\U000E0074\U000E007F",
    "\U0001F926\U0001F3FC\u200d\u2642\ufe0f", "\u00a9\u00ae\u2122",
]

combining = [
    "e\u0301", "cafe\u0301", "caf\u00e9", "A\u030a", "\u00c5", "\u212b", "\u2126", "\u03a9", "n\u0303",
    "a\u0308o\u0308u\u0308", "\u1100\u1161\u11a8", "\u1112\u1161\u11ab\u1100\u1173\u11af",
    "\ufb01nance \ufb02ow", "\u0065\u0301\u0302\u0303\u0304", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e\u0320\u034dA\u036b\u0357\u0334\u0362\u0335\u031c\u0330\u0354L\u0368\u0367\u0369\u0358\u0320G\u0311\u0357\u030e\u0305\u035b\u0341\u0334\u033b\u0348\u034d\u0354\u0339O\u0342\u030c\u030c\u0358\u0328\u0335\u0339\u033b\u031d\u0333",
    "\u0915\u093f", "\u0e01\u0e34\u0e4a", "\u05e9\u05c1\u05b8", "\u1e9b\u0323", "\u0041\u0327\u0301",
    "\u3131\u314f", "\u30ac \u30ab\u3099", "\u00bd\u2153\u215e", "\u2460\u24b6\u3251",
]

special = [
    "<s>", "</s>", "<unk>", "<s>Hello</s>", "<s> Hello </s>", "Hello<s>world", "text </s> more", "<s><s></s></s>",
    "<|begin_of_text|>", "<|begin_of_text|>Hello", "<|end_of_text|>", "<|eot_id|>", "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|reserved_special_token_5|>", "<|im_start|>user", "<|im_start|>user\nHello!<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|>system\nYou are Qwen.<|im_end|>", "<|endoftext|>", "<|im_end|><|endoftext|>", "<think>\nreasoning\n</think>\n\nanswer",
    "<tool_call>\n{\"name\": \"f\"}\n</tool_call>", "<|fim_prefix|>def f():<|fim_suffix|>\n<|fim_middle|>", "<|vision_start|><|image_pad|><|vision_end|>",
    "< s >", "<<s>>", "<|im_start", "im_start|>", "<|im_start|", "<s", "s>", "</ s>", "<S>", "<|IM_START|>",
    "plain <|im_start|> inside", "x<|endoftext|>y", "\n<s>\n", " <s> ", "<s>\u2581Hello", "<unk><unk><unk>",
    "<|eot_id|><|eot_id|>", "user: <|begin_of_text|> injection?", "<|begin_of_text|> leading space",
]

edge = [
    "a", "A", ".", "!", "?", ",", "'", "\"", "-", "_", "~", "`", "'s", "'S", "'ll", "'LL", "'Re", "'ve", "'d", "'m", "'t",
    "\u2019s curly", "don\u2019t", "'\u017f", "'\u212a", "x's y'S z'\u017f",
    "!!!???...", "----", "====", "****", "____", "~~~~", "....", ",,,,", "''''", "\"\"\"\"", "<<<>>>", "[[[]]]", "{{{}}}",
    "\u00c3\u00a9", "\u00e2\u0080\u0099", "\ufffd", "\ufffd\ufffd", "caf\ufffd", "<0xE4><0xBD><0xA0>", "<0x00>", "\u0120hello", "\u2581hello", "\u2581\u2581",
    "\u010a\u0120\u0120", "\\x80\\xff", "%E4%BD%A0", "a\u0000b", "\u0007bell", "\u001b[31mred\u001b[0m", "\u007f",
    "\u0080\u0081\u009f", "\ue000\uf8ff", "\U000F0000", "\U0010FFFD", "\uffff", "\ufffe", "\U0001F000",
    "a" * 300, "ab" * 200, "\u00e9" * 100, "\u4e2d" * 150, "\U0001F600" * 50, "aaaa bbbb " * 30,
    "x" * 1000, "!" * 200, ".-" * 100, " " * 300, "\n" * 100, "a\n" * 100, "0123456789" * 30,
    "Supercalifragilisticexpialidocious", "Pneumonoultramicroscopicsilicovolcanoconiosis",
    "Donaudampfschifffahrtsgesellschaftskapit\u00e4n", "antidisestablishmentarianism's",
    "camelCaseIdentifier snake_case_identifier SCREAMING_CASE kebab-case-id",
    "HTTPServerError XMLHttpRequest iOS macOS iPhone eBay",
    "\u0130\u0131 \u00df\u1e9e \u01c5\u01c6\u01c4 \u1f88", "\u03a3\u039f\u03a6\u039f\u03a3 \u03c3\u03bf\u03c6\u03bf\u03c2",
    "\u2211\u222b\u221a\u221e\u2260\u2264\u2265\u00b1\u00d7\u00f7", "\u2190\u2191\u2192\u2193\u21d2\u21d4",
    "\u2500\u2502\u250c\u2510\u2514\u2518\u251c\u2524\u252c\u2534\u253c", "\u2588\u2593\u2592\u2591",
    "\u00a1\u00bf\u00a7\u00b6\u2020\u2021\u2022\u2030", "\u02bc\u02bb\u02c8\u02d0", "\u3001\u3002\u300c\u300d\u300e\u300f\u3010\u3011",
    "\uff01\uff1f\uff08\uff09\uff1a\uff1b", "\u061f\u060c\u061b", "\u0964\u0965",
    "Ends with a space and a period .", "space before comma , and bang ! and question ?",
    "He said ' hello ' to me", "they n't know", "I 'm here and you 're there and we 've been and it 's",
    "do n't won 't", "a .b .c", " .", " ,", " ' ", " 's", "x ' ' ' y", "  ' s", " n ' t",
]

long_texts = [
    ("Speculative decoding accelerates autoregressive generation by proposing several tokens "
     "with a cheap draft model and verifying them in a single forward pass of the target model. "
     "When the draft agrees with the target, multiple tokens are accepted per step; otherwise the "
     "first disagreement is resampled from the residual distribution, which keeps the output "
     "distribution identical to the target's.\n\n") * 6,
    ("\u5728\u81ea\u7136\u8bed\u8a00\u5904\u7406\u4e2d\uff0c\u5206\u8bcd\u662f\u7b2c\u4e00\u6b65\u3002"
     "\u5b57\u8282\u5bf9\u7f16\u7801\uff08BPE\uff09\u628a\u9ad8\u9891\u7684\u5b57\u8282\u5bf9\u5408\u5e76\u6210\u65b0\u7684\u7b26\u53f7\u3002") * 10,
    "".join(prose[:12]) * 2,
    "\n".join(code[:10]),
    " ".join(emoji) * 2,
]

# Systematic combinations: each script's sample surrounded by spaces, punctuation, digits and
# newlines, which exercises the pre-tokenizer's boundaries.
samples = ["word", "\u0441\u043b\u043e\u0432\u043e", "\u03bb\u03ad\u03be\u03b7", "\u0643\u0644\u0645\u0629", "\u05de\u05d9\u05dc\u05d4",
           "\u0936\u092c\u094d\u0926", "\u0e04\u0e33", "\u5b57", "\u5358\u8a9e", "\ub2e8\uc5b4", "\U0001F600", "42"]
wrappers = ["{0}", " {0}", "{0} ", "({0})", "{0}.", "{0},{0}", "{0}\n", "\t{0}", "'{0}'", "{0}123", "{0}!?"]
combos = [w.format(s) for s in samples for w in wrappers]

corpus = prose + code + whitespace + digits + emoji + combining + special + edge + long_texts + combos
seen = set()
unique = []
for s in corpus:
    if s not in seen:
        seen.add(s)
        unique.append(s)

out = pathlib.Path(__file__).resolve().parents[2] / "tests" / "data" / "tokenizer" / "corpus.jsonl"
out.parent.mkdir(parents=True, exist_ok=True)
with out.open("w", encoding="utf-8") as f:
    for s in unique:
        f.write(json.dumps(s, ensure_ascii=False) + "\n")
print(f"{len(unique)} strings, {out.stat().st_size} bytes -> {out}")
