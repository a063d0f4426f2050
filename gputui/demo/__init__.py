"""gputui.demo"""
