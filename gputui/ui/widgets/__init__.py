"""gputui.ui.widgets"""
