"""Claude as an assistant to the person deciding: AI notes on cards and answers in their threads."""
